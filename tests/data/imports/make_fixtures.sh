#!/usr/bin/env bash
# Reproduce the import fixtures under tests/data/imports/ (NOT run by the test suite).
#
# Each tool is installed in its own virtualenv under $VENVS (never the project's .venv),
# run against tokenbench's simulator (fixed 50 ms TTFT, 10 ms ITL, prompt tokens counted
# with the tiny tokenizer in tokenizer/), and its result files are copied here.
# Needs: the project's .venv (`tokenbench`), PyPI, ~8 GB of disk for the four venvs
# (GuideLLM pulls a CUDA torch build), ~5 minutes of runs. Usage:
#     tests/data/imports/make_fixtures.sh [aiperf|guidellm|vllm|inference-perf|tokenbench ...]
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
VENVS="${VENVS:-/work/toolvenvs}"
OUT="${OUT:-$(mktemp -d)}"
PORT="${PORT:-8765}"
URL="http://127.0.0.1:$PORT"
TOK="$HERE/tokenizer"
TOOLS=("${@:-aiperf guidellm vllm inference-perf tokenbench}")
read -r -a TOOLS <<< "${TOOLS[*]}"

venv() {  # venv NAME: create $VENVS/NAME once
    [ -x "$VENVS/$1/bin/python" ] || python3 -m venv "$VENVS/$1"
}

install_aiperf() { venv aiperf; "$VENVS/aiperf/bin/pip" install -q aiperf==0.13.0; }
install_guidellm() { venv guidellm; "$VENVS/guidellm/bin/pip" install -q guidellm==0.8.1; }
install_inference_perf() {
    # 0.7.0 declares Requires-Python >=3.12 but parses and runs on 3.11 (checked with
    # ast); its dependencies are installed normally, itself without the Python check.
    venv inference-perf
    local P="$VENVS/inference-perf/bin/pip"
    "$P" install -q "aiohttp>=3.11.11" "pydantic>=2.10.6" "numpy>=2.2.2" "datasets>=3.3.2" \
        "transformers==5.13.0" "jinja2>=3.1.0" "google-cloud-storage>=3.1.0" "pyyaml>=6.0.2" \
        "boto3>=1.39.0" "uvloop>=0.21.0" "tqdm>=4.67.1" "aiofiles>=25.1.0" "tiktoken>=0.12.0" \
        "rich>=13.0.0" "av>=13.0.0" "pillow>=10.0.0" "prometheus-client>=0.20.0"
    "$P" install -q --no-deps --ignore-requires-python inference-perf==0.7.0
}
install_vllm() {
    # vllm 0.30.0 is the release that pins torch==2.13.0, the CPU build of which is on this
    # machine (/opt/wheels); vllm itself without its CUDA dependencies, then only what
    # `vllm bench serve` imports.
    venv vllm
    local P="$VENVS/vllm/bin/pip"
    "$P" install -q /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    "$P" install -q --no-deps vllm==0.30.0 "xgrammar<1.0.0,>=0.2.1"
    "$P" install -q regex cachetools psutil sentencepiece numpy "requests>=2.26.0" tqdm blake3 \
        py-cpuinfo "transformers>=5.10.4" "huggingface_hub>=1.31.0" "tokenizers>=0.21.1" \
        "safetensors>=0.6.2" protobuf "fastapi[standard]<0.137.0,>=0.133.0" "aiohttp>=3.13.3" \
        "openai>=2.25.0" "pydantic>=2.12.0" prometheus_client pillow pyyaml msgspec cbor2 \
        pybase64 pyzmq cloudpickle einops typing_extensions filelock partial-json-parser \
        jsonschema openai-harmony ijson setproctitle python-json-logger watchfiles ninja \
        "apache-tvm-ffi==0.1.11" "anthropic>=0.71.0" "lark==1.2.2" "llguidance<1.8.0,>=1.7.0" \
        "lm-format-enforcer==0.11.3" "tiktoken>=0.6.0" "outlines_core==0.2.14" \
        "prometheus-fastapi-instrumentator>=8.0.0" "opentelemetry-api>=1.27.0" \
        "opentelemetry-sdk>=1.27.0" "opentelemetry-exporter-otlp>=1.27.0" \
        "opentelemetry-semantic-conventions-ai>=0.4.1" "depyf==0.20.0" "mistral_common>=1.11.6" \
        "model-hosting-container-standards<1.0.0,>=0.1.14" "mcp<3.0.0,>=2.0.0"
}

mkdir -p "$OUT"
# The endpoint every tool measures: the project's own simulator.
"$ROOT/.venv/bin/tokenbench" simulate --port "$PORT" --ttft-ms 50 --itl-ms 10 \
    --prompt-tokenizer "$TOK/tokenizer.json" > "$OUT/simulator.log" 2>&1 &
SIM=$!
trap 'kill $SIM' EXIT
for _ in $(seq 50); do curl -sf "$URL/v1/models" > /dev/null && break; sleep 0.2; done
curl -sf "$URL/v1/models" > /dev/null || { cat "$OUT/simulator.log" >&2; exit 1; }

for tool in "${TOOLS[@]}"; do
case "$tool" in
aiperf)
    install_aiperf
    for c in 1 4; do
        # No HF_HUB_OFFLINE here: in offline mode aiperf 0.13.0 resolves names in the hub
        # cache only and refuses a local directory; online it loads the path directly.
        "$VENVS/aiperf/bin/aiperf" profile --model simulated --tokenizer "$TOK" --url "$URL" \
            --endpoint-type chat --streaming --concurrency "$c" --request-count 32 \
            --isl 128 --synthetic-input-tokens-stddev 0 --osl 64 --output-tokens-stddev 0 \
            --random-seed 28 --artifact-dir "$OUT/aiperf/c$c" --export-level records --ui none
        mkdir -p "$HERE/aiperf/0.13.0/c$c"
        cp "$OUT/aiperf/c$c"/{profile_export.jsonl,profile_export_aiperf.json,profile_export_aiperf.csv,profile_export_console.txt} \
            "$HERE/aiperf/0.13.0/c$c/"
    done ;;
guidellm)
    install_guidellm
    for c in 1 4; do
        mkdir -p "$OUT/guidellm/c$c"
        sed "s#OUT/#$OUT/#; s#TOKDIR#$TOK#; s#http://127.0.0.1:8765#$URL#" "$HERE/guidellm/0.8.1/c$c/scenario.json" \
            > "$OUT/guidellm/c$c/scenario.json"
        HF_HUB_OFFLINE=1 "$VENVS/guidellm/bin/guidellm" run --scenario "$OUT/guidellm/c$c/scenario.json" \
            --disable-console-interactive | tee "$OUT/guidellm/c$c/console.txt"
        cp "$OUT/guidellm/c$c/benchmarks.json" "$HERE/guidellm/0.8.1/c$c/"
    done ;;
vllm)
    install_vllm
    for c in 1 4; do
        HF_HUB_OFFLINE=1 "$VENVS/vllm/bin/vllm" bench serve --backend openai-chat --base-url "$URL" \
            --endpoint /v1/chat/completions --model simulated --tokenizer "$TOK" \
            --dataset-name random --random-input-len 128 --random-output-len 64 \
            --random-range-ratio 0 --num-prompts 32 --max-concurrency "$c" --ignore-eos \
            --seed 28 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
            --save-result --save-detailed --result-dir "$HERE/vllm-bench/0.30.0" \
            --result-filename "vllm-bench-c$c.json" | tee "$OUT/vllm-c$c.log"
        grep -A40 "Serving Benchmark Result" "$OUT/vllm-c$c.log" > "$HERE/vllm-bench/0.30.0/console-c$c.txt"
    done ;;
inference-perf)
    install_inference_perf
    sed "s#/work/wt-fixtures/tests/data/imports/tokenizer#$TOK#; s#path: .*/reports#path: $OUT/inference-perf/reports#; s#http://127.0.0.1:8765#$URL#" \
        "$HERE/inference-perf/0.7.0/config.yml" > "$OUT/inference-perf.yml"
    HF_HUB_OFFLINE=1 "$VENVS/inference-perf/bin/inference-perf" --config_file "$OUT/inference-perf.yml"
    rm -rf "$HERE/inference-perf/0.7.0/reports"
    cp -r "$OUT/inference-perf/reports" "$HERE/inference-perf/0.7.0/reports" ;;
tokenbench)
    "$ROOT/.venv/bin/tokenbench" run --target "$URL" --model simulated --concurrency 1,4 \
        --requests 32 --prompt-tokens 128 --output-tokens 64 --tokenizer "$TOK/tokenizer.json" \
        --name fixtures-sim --db "$OUT/tokenbench.duckdb" \
        --columns ttft_p50_ms,ttft_p99_ms,output_tok_s > "$HERE/tokenbench/report-c1-c4.txt" ;;
*) echo "unknown tool: $tool" >&2; exit 2 ;;
esac
done
echo "raw outputs in $OUT"
