# tickbench — the two commands: `make run` and `make test`. Both create .venv and install first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv run run-paper run-market test test-fast lint bench-generator bench-market-generator bench-ingest install-servers screenshot site site-screenshot clean

# tickbench, then every engine's client (each engine folder's engine.toml names its own)
$(STAMP): pyproject.toml $(wildcard src/tickbench/engines/*/engine.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,cluster]'
	$(BIN)/pip install --quiet $$($(BIN)/python -m tickbench.engines.requirements)
	touch $(STAMP)

venv: $(STAMP)

## run: generate the default dataset, load the embedded engines, run the published suite,
## verify every answer and write results/latest/{results.json,report.html,report.md}
run: venv
	rm -rf results/latest
	$(BIN)/tickbench run --out results/latest

## run-paper: the reference run at the paper's scale (SF 1, about 57 M rows): generate (or reuse)
## data/sf1-seed7, run the published suite on every engine (servers need `make install-servers`;
## an engine that is not installed is recorded as unavailable), verify, write results/paper.
## An interrupted run continues where it stopped; `rm -rf results/paper` starts over.
PAPER_ENGINES ?= all
PAPER_REPETITIONS ?= 5
# InfluxDB parses every field of the book's 80-field rows: its SF 1 load took 24 min here alone (2026-11-24), over an hour on a busy machine
PAPER_LOAD_TIMEOUT ?= 10800
# every repetition of every query at SF 1 (InfluxDB's O-S took 19 s a repetition): no cell stops at its budget
PAPER_CELL_BUDGET ?= 1800
run-paper: venv
	@if [ -f results/paper/results.json ]; then \
	  $(BIN)/tickbench run --resume results/paper; \
	else \
	  $(BIN)/tickbench run --engines $(PAPER_ENGINES) --scale 1 --seed 7 --repetitions $(PAPER_REPETITIONS) \
	    --load-timeout $(PAPER_LOAD_TIMEOUT) --cell-budget $(PAPER_CELL_BUDGET) \
	    --out results/paper; \
	fi

## run-market: the market suite's reference run (SF 1, N = 1,000 instruments: about 50 M quotes and
## 5 M trades over 20 days): generate (or reuse) the market dataset, run the market suite on every
## engine installed here (M-VWAB-12D by 1, 10, 50 and 100 users, M-SNAP and M-STATS-UI by 10), verify,
## write results/market. An interrupted run continues where it stopped.
MARKET_REPETITIONS ?= 5
run-market: venv
	@if [ -f results/market/results.json ]; then \
	  $(BIN)/tickbench run --resume results/market; \
	else \
	  $(BIN)/tickbench run --engines all --suite market --scale 1 --universe 1000 --seed 7 \
	    --users 1,10,50,100 --ui-users 10 --repetitions $(MARKET_REPETITIONS) --load-timeout $(PAPER_LOAD_TIMEOUT) --cell-budget $(PAPER_CELL_BUDGET) \
	    --out results/market; \
	fi

## test: the whole test suite (server tests need `make install-servers` first; CI does it)
test: venv
	$(BIN)/pytest

test-fast: venv
	$(BIN)/pytest -m "not slow and not server"

lint: venv
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

## bench-ingest: per engine, harness ceiling, max sustained ingest rate, % of its bulk path, p99 at half of it
bench-ingest: venv
	$(BIN)/python benchmarks/ingest_rates.py --engines all --writers 2 --tables book --out results/bench-ingest

## bench-generator: generator throughput (rows/s, MB/s per table) at SF 1 (about 2 minutes on 2 cores, 9 GB in a temporary directory)
bench-generator: venv
	$(BIN)/python benchmarks/generator.py --scale 1 --jobs 2

## bench-market-generator: the market dataset's generator at SF 1 with 1,000 instruments (about 55 M rows,
## 1.1 GB of Parquet in a temporary directory): rows/s, MB/s, wall time, peak memory
bench-market-generator: venv
	$(BIN)/python benchmarks/market_generator.py --scale 1 --universe 1000 --jobs 2

install-servers: venv
	$(BIN)/tickbench install --servers

clean:
	rm -rf $(VENV) results data

## docs: regenerate the support matrix in README.md from the engine folders
docs: venv
	$(BIN)/python -m tickbench.docs

## screenshot: docs/report.png, the top of a report.html in headless Chromium (apt-get install -y chromium)
## SHOT_REPORT=path/to/report.html picks another report (default: the one `make run` writes)
SHOT_REPORT ?= results/latest/report.html
screenshot: venv
	@test -f "$(SHOT_REPORT)" || { echo "no $(SHOT_REPORT): run 'make run' first, or set SHOT_REPORT=path"; exit 2; }
	mkdir -p docs
	prof=$$(mktemp -d) && chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	  --disable-background-networking --disable-component-update --disable-sync --user-data-dir=$$prof \
	  --host-resolver-rules="MAP * ~NOTFOUND" --hide-scrollbars --window-size=1400,2300 \
	  --virtual-time-budget=30000 --screenshot=$(CURDIR)/docs/report.png "file://$(abspath $(SHOT_REPORT))" \
	  2>/dev/null; status=$$?; rm -rf $$prof; exit $$status
	@echo "docs/report.png"

## site: the results site of the reference runs kept under docs/results/ (each with the conditions.txt
## beside it): results/site/index.html, its data.js and plotly.min.js; open index.html from disk, or
## copy the folder to any static host. SITE_RESULTS picks other results files.
SITE_RESULTS ?= $(sort $(wildcard docs/results/*/*.json))
SITE_OUT ?= results/site
site: venv
	$(BIN)/tickbench site $(SITE_RESULTS) --out $(SITE_OUT)

## site-screenshot: docs/site.png, the site in headless Chromium, driven as tests/test_site.py drives it
site-screenshot: site
	$(BIN)/python -m tests.browser $(SITE_OUT)/index.html docs/site.png --hash "suite=published" --size 1400x1000

## beyond: the suites beyond the paper on the embedded engines at a small matrix (minutes);
## the full matrices are in README.md, "Suites beyond the paper"
.PHONY: beyond test-beyond
beyond: venv
	rm -rf results/beyond
	$(BIN)/tickbench run --suite tick-latency --tick-matrix 1x10000,10x10000 --out results/beyond/tick
	$(BIN)/tickbench run --suite stream --stream-rates 10000,max --stream-writers 1,2 --stream-seconds 5 --out results/beyond/stream
	$(BIN)/tickbench run --suite concurrency --concurrency-clients 1,2,4 --concurrency-seconds 5 --out results/beyond/concurrency
	$(BIN)/tickbench run --suite scaling --out results/beyond/scaling

## test-beyond: the tests of those suites (DuckDB, tiny sizes)
test-beyond: venv
	$(BIN)/pytest tests/test_suites_beyond.py
