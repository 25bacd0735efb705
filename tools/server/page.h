/* The chat page served at "/", built into the binary (no files to install). */
#ifndef PICOLM_SERVER_PAGE_H
#define PICOLM_SERVER_PAGE_H
extern const char picolm_chat_page[];
#endif
