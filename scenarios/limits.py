"""Upper bounds of everything a scenario (or any other REST input) can ask for, in one place.

A REST submitter is authenticated but untrusted (docs/security.md): no single request may
exhaust or wedge the control plane. Every count, size, rate and duration a scenario
names is therefore bounded here, and the bounds are chosen so that the largest valid
scenario is still cheap to parse, validate, plan and store, while staying generous for
real benchmarks. Each bound says in one line why it is that number; docs/security.md
(section "Bounds") lists them for users, and tests/unit/scenarios/test_limits.py keeps the two
in step. A value several inputs take (a scenario's load and a run's overrides, a
schedule and the trend routes) is bounded by one type at the end, which each of them
uses, so its bounds are declared once.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

# --------------------------------------------------------------------------- scenario shape

# Endpoints compared in one run: real comparisons name a handful; each one multiplies shards.
MAX_PROVIDERS: Final = 32
# Regions of one run: a global fleet has tens of regions; each one multiplies shards.
MAX_REGIONS: Final = 32
# Load levels (stages) of one run: sweeps use 5-20 levels; 100 covers a fine-grained sweep.
MAX_LEVELS: Final = 100
# Classes of the workload mix: a traffic profile needs a few; 64 covers a fitted histogram.
MAX_MIX_CLASSES: Final = 64

# --------------------------------------------------------------------------- load

# Virtual users (or in-flight cap) per stage, provider and region: 100k streams is ~200
# worker processes at 512 streams each, beyond any single benchmark's fleet.
MAX_CONCURRENCY: Final = 100_000
# Requests per stage, provider and region: 10M is hours at thousands of requests per second.
MAX_REQUESTS_PER_LEVEL: Final = 10_000_000
# Planned requests of a whole run (levels × providers × regions × requests per level, or
# rate × duration for open loops): 100M rows is ~50 GB of records, a very large run.
MAX_TOTAL_REQUESTS: Final = 100_000_000
# Arrivals per second per stage, provider and region: 100k rps is 500 shards at the
# default 200 rps per shard, far above any hosted API's rate limit.
MAX_RPS: Final = 100_000.0
# Gamma shape of open-loop arrivals: 0.001 is extremely bursty, 1000 nearly constant.
MIN_BURSTINESS: Final = 0.001
MAX_BURSTINESS: Final = 1000.0
# Shards of one run (provider × region × stage × part): the plan, its DuckDB rows and its
# Celery tasks grow with it; 10k shards plan in well under a second.
MAX_SHARDS_PER_RUN: Final = 10_000

# Turns of one multi-turn session (workload.sessions, a replayed session): chat sessions
# run a few to a few dozen turns; 1000 bounds a session's records and its history.
MAX_SESSION_TURNS: Final = 1000
# Think time between an answer and the next turn: an hour; longer is a new session.
MAX_THINK_TIME_S: Final = 3600.0
# Characters of an answer a session keeps (to send back with the next turn) per planned
# answer token: real tokens average ~4; past 16 a server ignored max_tokens, and the
# answer is cut there so that one server cannot grow a worker's memory unbounded.
MAX_ANSWER_CHARS_PER_TOKEN: Final = 16
# Characters of a replayed session id: ids are uuids or hashes.
MAX_SESSION_ID_CHARS: Final = 256

# Sampled requests a shadow gateway holds before enqueueing them (each with its body).
MAX_GATEWAY_PENDING: Final = 100_000
# Samples waiting in a region's queue above which a gateway drops new shadows.
MAX_GATEWAY_BACKLOG: Final = 1_000_000

# --------------------------------------------------------------------------- adaptive load

# Open-loop rates of a sweep (load.sweep.points): curves are drawn from 5-20 points; each
# is a stage of its own, decided after the throughput stage.
MAX_SWEEP_POINTS: Final = 50
# Stages of one capacity search (load.find_capacity.max_stages): a bisection halves its
# bracket each stage, so 40 stages narrow a 1e-7..1e5 rps bracket to 0.1 % (~27 stages)
# with room for stages that widen it; each is a stage of requests_per_level requests.
MAX_SEARCH_STAGES: Final = 40
# A search needs its synchronous stage, one probe and one more to bracket anything.
MIN_SEARCH_STAGES: Final = 3
# Relative precision of a search or of a stop_when interval: 0.1 % is below what a
# benchmark's own noise lets any stage resolve.
MIN_PRECISION: Final = 0.001
# Highest attainment target, percentile and confidence: 0.9999 already needs ~40k
# requests per stage to be shown with confidence; 1.0 can never be.
MAX_QUANTILE: Final = 0.9999
MAX_CONFIDENCE: Final = 0.9999
# The knee's latency factor over the synchronous stage's (load.sweep.knee_factor).
MAX_KNEE_FACTOR: Final = 1000.0
# Lowest rate a capacity search probes (req/s): below it the endpoint is taken not to
# hold the SLO at all (one request every 100 s).
MIN_SEARCH_RPS: Final = 0.01

# --------------------------------------------------------------------------- durations

# A stage (and its warm-up / cool-down): a week-long soak test is the longest real use.
MAX_DURATION_S: Final = 7 * 24 * 3600.0
# One request's deadline and the longest silence within it: an hour covers the slowest
# reasoning models; beyond that a request is stuck, not slow.
MAX_REQUEST_TIMEOUT_S: Final = 3600.0
# TCP/TLS connect deadline: five minutes is already far beyond any healthy network.
MAX_CONNECT_TIMEOUT_S: Final = 300.0
# Wait between 429 retries (and the first back-off): an hour, like the request deadline.
MAX_RETRY_WAIT_S: Final = 3600.0
# Latencies a scenario states (simulated TTFT/ITL/stall, SLO targets): an hour, in ms.
MAX_LATENCY_MS: Final = 3_600_000.0

# --------------------------------------------------------------------------- tokens

# Prompt or answer tokens of one request (every length distribution's values, and the
# shared prefix): 1M is the largest context window offered today, and a 1M-token prompt
# is a ~5.3 MB request (10M built a 53 MB one).
MAX_TOKENS: Final = 1_000_000
# Relative weight of a mix class: only ratios matter; finite and bounded keeps sums exact.
MAX_WEIGHT: Final = 1_000_000.0
# Context a simulated deployment reserves per sequence: above every catalog model's window.
MAX_CONTEXT_TOKENS: Final = 10_000_000
# Simulated batch size and chunked-prefill budget: above any real serving configuration.
MAX_BATCH: Final = 65_536
# Prompt tokens a simulated endpoint counts per word: code and CJK text run a few.
MAX_PROMPT_TOKEN_RATIO: Final = 10.0
MAX_PREFILL_TOKENS: Final = 10_000_000
# Tokens per simulated SSE event: real servers send 1-16; 4096 still bounds one event.
MAX_TOKENS_PER_CHUNK: Final = 4096
# Devices of a deployment: a rack-scale NVL72 is 72; 4096 leaves room for clusters.
MAX_GPUS: Final = 4096
# Draft tokens per simulated speculative-decoding step: real drafters propose 1-10.
MAX_SPEC_DECODE_TOKENS: Final = 64
# A simulated GPU's power draw: an H100 SXM is 700 W, a GB200 superchip 2.7 kW.
MAX_GPU_WATTS: Final = 10_000.0
# Sigma of a lognormal length (sd of ln length): at 10 nearly every draw is already clipped.
MAX_LOGNORMAL_SIGMA: Final = 10.0

# --------------------------------------------------------------------------- money

# USD per million tokens: the dearest hosted model costs a few hundred.
MAX_PRICE_PER_MTOK_USD: Final = 1_000_000.0
# USD per GPU-hour: list prices are a few dollars.
MAX_GPU_HOUR_USD: Final = 100_000.0
# USD one run may be capped at (scenario budget.max_cost_usd): a million dollars.
MAX_RUN_COST_USD: Final = 1_000_000.0

# --------------------------------------------------------------------------- sizes and strings

# Serialized JSON of a provider's extra_body, and of a Replicate provider's input: sent
# with every request, so it must stay small next to the prompt.
MAX_EXTRA_BODY_BYTES: Final = 65_536
# Tools offered with one request: OpenAI accepts at most 128 functions per request.
MAX_TOOLS: Final = 128
# Serialized JSON of a workload's tool definitions: sent with every request that carries
# tools, so it must stay small next to the prompt (128 tools of ~500 bytes each).
MAX_TOOL_DEFINITIONS_BYTES: Final = 65_536
# Images (workload.images): each pixel asked for is memory on every worker and bytes on
# the wire, so sizes, counts and the generated pool are bounded by pixels.
# One side of an image: 4096 px covers 4K frames; servers scale larger images down anyway.
MAX_IMAGE_SIDE: Final = 4096
# Pixels of one image: 8 MP holds a 3840x2160 frame; its PNG is at most ~24 MiB.
MAX_IMAGE_PIXELS: Final = 8_388_608
# Encoded bytes of one image, checked after encoding: 3 bytes a pixel plus headers.
MAX_IMAGE_BYTES: Final = 3 * MAX_IMAGE_PIXELS + 1_048_576
# Images carried by one request: multi-image prompts use a few; 64 bounds the body.
MAX_IMAGES_PER_REQUEST: Final = 64
# Pixels one request carries (images × pixels): 16 MP is 16 one-megapixel images, a
# request body of at most ~64 MiB as base64 (and a few MiB in practice).
MAX_REQUEST_IMAGE_PIXELS: Final = 16_777_216
# Distinct images generated for a run (the pool requests take them from).
MAX_DISTINCT_IMAGES: Final = 1024
# Pixels of that pool (distinct × pixels): 64 MP is at most ~256 MiB of base64 held by a
# worker for the run (~100 MiB for PNGs of the generated content).
MAX_IMAGE_POOL_PIXELS: Final = 67_108_864
# Keys of a Replicate provider's extra input.
MAX_INPUT_KEYS: Final = 256
# Free text (a scenario's description).
MAX_TEXT_CHARS: Final = 10_000
# Identifiers (model ids, deployment names, catalog ids, API versions, field names).
MAX_ID_CHARS: Final = 256
# URLs (base_url, endpoint): browsers and proxies cap URLs near 2-8 KB.
MAX_URL_CHARS: Final = 2048
# Seeds are 64-bit signed integers (stored as BIGINT, hashed into per-request seeds).
MIN_SEED: Final = -(2**63)
MAX_SEED: Final = 2**63 - 1

# --------------------------------------------------------------------------- workload.dataset

# Columns of a table a dataset is converted from: only the mapped ones are decoded, but
# a schema of millions of columns is itself costly to read; real datasets have tens.
MAX_DATASET_COLUMNS: Final = 4096
# Characters of one message of a converted row: a MAX_TOKENS-token prompt is ~5 MB.
MAX_DATASET_CELL_CHARS: Final = 8 * 1024 * 1024
# Turns of one conversation: real chats have tens, long agent traces a few hundred.
MAX_CONVERSATION_TURNS: Final = 1024
# Decoded bytes of the columns a conversion reads, as a multiple of the dataset byte cap:
# text compresses 3-5x in Parquet; above that a file is refused before it is decoded.
DATASET_DECODED_FACTOR: Final = 8
# Address space of the process that converts an uploaded file (RLIMIT_DATA): decoded
# columns of a 64 MiB file plus their Python objects and the JSONL written from them.
DATASET_PROCESS_DATA_BYTES: Final = 2048 * 1024 * 1024
# Seconds a conversion may take before its process is killed: a 64 MiB file converts in
# a few seconds; a file that takes minutes is hostile or broken.
DATASET_CONVERSION_TIMEOUT_S: Final = 300.0
# Seconds an uploaded (or used) tokenizer.json may take to load and encode the probe
# text in its check process (scenarios/tokenizers/probe.py) before it is killed and the
# tokenizer refused: a 10 MB tokenizer loads and encodes it in about a second.
TOKENIZER_PROBE_TIMEOUT_S: Final = 20.0
# Slowest counting of a dataset's rows a worker waits for, in characters a second, on
# top of TOKENIZER_PROBE_TIMEOUT_S (the count runs in such a process too): real
# tokenizers count millions of characters a second on one core; 64 MiB of rows at this
# rate is about 11 minutes, after which the shard fails instead of waiting for hours.
MIN_COUNT_CHARS_PER_S: Final = 100_000
# Address space of that process (RLIMIT_DATA): a large vocabulary and its merges.
TOKENIZER_PROBE_DATA_BYTES: Final = 2048 * 1024 * 1024
# --------------------------------------------------------------------------- imports

# Bytes of one imported set of result files (docs/import.md): a 100,000-request AIPerf
# export with its ITL lists is ~60 MB; GuideLLM and vLLM bench files are smaller.
MAX_IMPORT_BYTES: Final = 256 * 1024 * 1024
# Files of one imported set (a tool's result folder holds a handful).
MAX_IMPORT_FILES: Final = 64
# Requests of one imported run, over all its stages: what one shard may record.
MAX_IMPORT_REQUESTS: Final = 1_000_000
# Stages (load levels, benchmarks of a sweep) of one imported run.
MAX_IMPORT_STAGES: Final = 256
# Nesting of a JSON document: the tools' files are 6-8 levels deep.
MAX_IMPORT_JSON_DEPTH: Final = 64
# Characters of one text field kept from an imported file (an error message, a label).
MAX_IMPORT_TEXT_CHARS: Final = 4096
# Seconds the child that parses an imported set may take before it is killed.
IMPORT_PARSE_TIMEOUT_S: Final = 300.0

# --------------------------------------------------------------------------- server telemetry

# Seconds between scrapes of a provider's metrics_url: faster than 4 Hz the scrapes
# themselves load the server being measured; slower than a minute a stage of a few
# minutes has too few samples to align with latency.
MIN_METRICS_INTERVAL_S: Final = 0.25
MAX_METRICS_INTERVAL_S: Final = 60.0
# Bytes of one metrics answer read: vLLM with its histograms is ~0.1-1 MB per model and a
# DCGM exporter ~10 KB per GPU; a larger answer is a scrape error, never read whole.
MAX_METRICS_BODY_BYTES: Final = 8 * 1024 * 1024
# Series kept per scrape (only those of the known metric names, docs/telemetry.md): a
# node of 8 GPUs with a few engines has tens; the rest are counted as dropped.
MAX_METRICS_SERIES: Final = 1000
# Labels kept per series, and characters per label name or value: Prometheus labels are
# short identifiers; a series beyond either is dropped (and counted).
MAX_METRICS_LABELS: Final = 16
MAX_METRICS_LABEL_CHARS: Final = 256
# One scrape's deadline (connect to end of body), whatever the interval: a metrics
# endpoint slower than this is recorded as an error, not waited for.
MAX_METRICS_SCRAPE_S: Final = 10.0

# --------------------------------------------------------------------------- documents

# YAML aliases (``*name``) in one document: real scenarios reuse an anchor a few times.
MAX_YAML_ALIASES: Final = 1000
# Nodes of one document with every alias expanded (the alias-bomb defence): the largest
# valid scenario has a few thousand; 100k validates in well under a second.
MAX_DOCUMENT_NODES: Final = 100_000
# Nesting depth of one document (YAML or JSON), aliases expanded: scenarios nest < 10 deep.
MAX_DOCUMENT_DEPTH: Final = 64

# --------------------------------------------------------------------------- SQL answers

# Bytes of one /v1/sql answer (TOKENBENCH__API__SQL_MAX_BYTES): a 64 MiB answer is
# millions of rows of figures; the control plane holds at most two at once.
DEFAULT_SQL_MAX_BYTES: Final = 64 * 1024 * 1024
# Rows of one /v1/sql answer (its ``max_rows`` at most): with the byte cap, what one
# answer may hold; larger results are aggregated, paged, or exported from the file.
MAX_SQL_ANSWER_ROWS: Final = 100_000
# Per-request rows of one REST report (``?requests=true``), in rows and in encoded bytes:
# a report is built in memory and read whole by a browser or a script, so it stays small
# (a row with a long answer's ITL gaps is tens of KB); the records route has every row.
MAX_REPORT_REQUEST_ROWS: Final = 10_000
MAX_REPORT_REQUEST_BYTES: Final = 16 * 1024 * 1024
# Shards of the runs one ``GET /v1/runs`` answer shows (each with every shard): ten of the
# largest runs, ~25 MB of JSON; 1,000 of them would be ~10 GB of objects in the control
# plane. Older runs past it are left out (``X-Tokenbench-Truncated: true``).
MAX_LISTED_SHARDS: Final = 100_000
# Entries one list answer asks for (``?limit=`` of GET /v1/runs and /v1/shadow-sessions).
MAX_LIST_LIMIT: Final = 1000
# Address space a query process may allocate beyond the interpreter (RLIMIT_DATA): DuckDB's
# own 1 GB ``max_memory`` plus room for the Arrow result and its encoding.
SQL_PROCESS_DATA_BYTES: Final = 1536 * 1024 * 1024

# --------------------------------------------------------------------------- schedules and trends

# Schedules of one control plane (docs/tracking.md): each one starts runs on its own, so
# 100 at the minimum interval is already 100 runs a minute on the fleet.
MAX_SCHEDULES: Final = 100
# A cron expression: five (or six, with seconds) fields of lists and ranges fit in 100.
MAX_CRON_CHARS: Final = 256
# Default shortest gap between two fires of one schedule (TOKENBENCH__SCHEDULES__MIN_INTERVAL_S):
# a benchmark run takes minutes; firing more often than once a minute only queues them.
MIN_SCHEDULE_INTERVAL_S: Final = 60.0
# Fires a schedule keeps on record (started, skipped, failed): older ones are dropped, a
# schedule's runs stay (run_origins); a year of hourly fires is ~9k.
MAX_SCHEDULE_FIRES_KEPT: Final = 10_000
# Runs one trend report reads: each run's summary is a query over its records.
MAX_TREND_RUNS: Final = 500
# Earlier runs the regression verdict compares the latest with (the trailing window).
MAX_TREND_WINDOW: Final = 50
# Smallest relative change a trend counts as a regression (min_change): 10 is +1000 %.
MAX_MIN_CHANGE: Final = 10.0
# Webhook deliveries: tries of one notification, and the deadline of one try, so a slow
# or hostile receiver holds a control-plane task for at most attempts × timeout.
MAX_WEBHOOK_ATTEMPTS: Final = 5
MAX_WEBHOOK_TIMEOUT_S: Final = 30.0

# --------------------------------------------------------------------------- failover

# Faults of one simulated endpoint (simulate.faults): each is checked per request, so a
# handful describes any outage; more is a configuration mistake.
MAX_FAULTS: Final = 16
# Period of a fault burst (faults[].burst.every_s): a day of periodic outages.
MAX_BURST_PERIOD_S: Final = 24 * 3600.0
# Retry-After a simulated 429 sends (faults[].retry_after_s).
MAX_RETRY_AFTER_S: Final = 3600.0
# Requests a simulated endpoint keeps in its log (simulate.request_log): one entry is
# ~200 bytes in memory, so the ceiling is ~200 MB; the run reads it every second.
MAX_REQUEST_LOG: Final = 1_000_000
# Upstreams a local run starts (scenario.upstreams): a gateway's fallback chain.
MAX_UPSTREAMS: Final = 8
# Ports an upstream may bind: unprivileged ones only, on loopback.
MIN_UPSTREAM_PORT: Final = 1024
MAX_UPSTREAM_PORT: Final = 65535
# Fallbacks of one tokenbench gateway (fallbacks:): each is one more try of a request.
MAX_GATEWAY_FALLBACKS: Final = 8
# Entries one GET /tokenbench/requests answer holds (a page; ?after= reads the next).
MAX_REQUEST_LOG_PAGE: Final = 10_000

# --------------------------------------------------------------------------- OTLP traces

# One OTLP export body (after gzip): vLLM's batch processor sends <= 512 spans of ~1 kB.
MAX_OTLP_BODY_BYTES: Final = 4 * 1024 * 1024
# Spans stored from one export request (the rest are counted and dropped): 4x a batch.
MAX_OTLP_SPANS: Final = 2048
# Seconds after its end that a run still takes spans: exporters batch for ~5 s, retry later.
OTLP_GRACE_S: Final = 120.0

# --------------------------------------------------------------------------- bounded values

# Each a value with both of its bounds, for every input that takes it (pydantic fields;
# the command line's options name the same constants).

# A closed-loop level (virtual users) or an open loop's in-flight cap.
ConcurrencyLevel = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
# An open-loop stage's arrival rate (requests per second).
Rate = Annotated[float, Field(gt=0, le=MAX_RPS)]
# Requests (or sessions) per stage, provider and region.
StageRequests = Annotated[int, Field(ge=1, le=MAX_REQUESTS_PER_LEVEL)]
# A stage's length in seconds.
StageSeconds = Annotated[float, Field(gt=0, le=MAX_DURATION_S)]
# A seed of the random choices.
Seed = Annotated[int, Field(ge=MIN_SEED, le=MAX_SEED)]
# How many entries of a list an answer holds (``?limit=``).
ListLimit = Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)]
# Earlier runs a trend judges the latest against, and the smallest change it counts.
TrendWindow = Annotated[int, Field(ge=1, le=MAX_TREND_WINDOW)]
MinChange = Annotated[float, Field(ge=0, le=MAX_MIN_CHANGE)]


def cap_data_memory(data_bytes: int) -> None:
    """Cap this process's data segment and anonymous mappings (``RLIMIT_DATA``): past it,
    allocations fail (DuckDB answers out of memory, a tokenizer raises) instead of growing
    the host's memory. Only ever lowers the limit. Called first thing in the children that
    run untrusted work: user SQL, dataset conversion, the tokenizer probe."""
    try:
        import resource  # noqa: PLC0415 - POSIX only, and only the children need it
    except ImportError:  # pragma: no cover - Windows has no rlimits
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = data_bytes if hard == resource.RLIM_INFINITY else min(hard, data_bytes)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
