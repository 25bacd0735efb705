# `make bench-report`: the README's speed table, measured on this host
# (tools/bench_report.py: the backends side by side in one picolm-bench run
# per model, and llama.cpp's llama-bench on the same files when
# LLAMA_BENCH=/path/to/llama-bench is given).  BENCH_MODELS, BENCH_BACKENDS,
# BENCH_THREADS and BENCH_ARGS choose what runs (defaults in the script).
bench-report: all
	@PICOLM_BUILD=$(BUILD) BENCH_MODELS="$(BENCH_MODELS)" BENCH_BACKENDS="$(BENCH_BACKENDS)" \
	  BENCH_THREADS="$(BENCH_THREADS)" BENCH_ARGS="$(BENCH_ARGS)" LLAMA_BENCH="$(LLAMA_BENCH)" \
	  python3 tools/bench_report.py

.PHONY: bench-report
