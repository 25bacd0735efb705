# `make quality` (tools/quality.sh): quantize tiny-shakespeare-f32.gguf into
# every format and llama.cpp mix with picolm-quantize, measure perplexity on
# heldout.txt with picolm-perplexity, write the table to docs/quality.md.
# About 20-40 s per model with a SIMD backend.  Knobs: CTX, CHUNKS (first N
# windows only), THREADS, BACKEND, OUT (- = stdout only).
quality: $(BUILD)/bin/picolm-quantize $(BUILD)/bin/picolm-perplexity $(FORMAT_SO) $(BACKEND_SO)
	PICOLM_BUILD=$(BUILD) sh tools/quality.sh

.PHONY: quality
