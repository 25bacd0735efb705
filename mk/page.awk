# page.html -> a C string (picolm-server's built-in chat page).
# Backslashes are doubled ("&&": the match twice), then quotes escaped.
BEGIN { print "/* generated from tools/server/page.html by mk/page.awk */"; print "const char picolm_chat_page[] ="; }
{ gsub(/\\/, "&&"); gsub(/"/, "\\\""); print "    \"" $0 "\\n\""; }
END { print "    ;"; }
