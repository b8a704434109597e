"""Images through a real `tokenbench run` (embedded Redis, real workers, DuckDB): against
the simulator, records carry the images' count, bytes and pixels, reported prompt tokens
are the text plus the simulator's tile rule, and text calibration stays within its
tolerance with images on; at a fake that records bodies, two providers get byte-identical
images for the same request; a scenario over a bound exits 2 naming the field."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from analytics.report.images import with_images
from tests.conftest import CliResult
from tests.fakes.provider_server import KEY, FakeProviders

pytestmark = pytest.mark.integration

# Tile-rule tokens of the two sizes: 64 x 48 is one tile, 600 x 500 two (2 x 1).
SIZES = [{"width": 64, "height": 48}, {"width": 600, "height": 500}]
TOKENS_BY_PIXELS = {64 * 48: 255, 600 * 500: 425}


def _images(**extra: Any) -> dict[str, Any]:
    return {
        "fraction": 0.5,
        "count": {"dist": "uniform", "min": 1, "max": 2},
        "sizes": SIZES,
        "distinct": 6,
        **extra,
    }


def _scenario(name: str, providers: list[dict[str, Any]], calibrate: bool) -> dict[str, Any]:
    return {
        "name": name,
        "seed": 21,
        "providers": providers,
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "uniform", "min": 40, "max": 120},
                    "output_tokens": {"dist": "fixed", "value": 3},
                }
            ],
            "images": _images(),
            "calibrate": calibrate,
        },
        "load": {"concurrency": [2], "requests_per_level": 40},
    }


def _simulated(name: str, **simulate: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "simulated",
        "simulate": {"ttft_ms": 5, "itl_ms": 1, "tokens_per_chunk": 3, **simulate},
    }


def _run(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    scenario: dict[str, Any],
    env: dict[str, str] | None = None,
) -> tuple[CliResult, Path]:
    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{scenario['name']}.duckdb"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench(
        "run", str(path), "--db", str(db), "--format", "json", env={**clean, **(env or {})}
    )
    return result, db


def _report(result: CliResult) -> dict[str, Any]:
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    return dict(report)


def test_records_keep_the_images_and_prompt_tokens_follow_the_tile_rule(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    providers = [_simulated("split"), _simulated("summed", report_image_tokens=False)]
    result, db = _run(tmp_path, tokenbench, _scenario("images-rule", providers, calibrate=False))
    report = _report(result)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT provider, seq, images, image_bytes, image_pixels, image_digest, "
        "image_prompt_tokens, prompt_tokens, planned_prompt_tokens, status FROM requests"
    ).fetchall()
    assert len(rows) == 80 and {row[9] for row in rows} == {"ok"}
    digests: dict[int, set[str | None]] = defaultdict(set)
    for provider, seq, n, size, pixels, digest, image_tokens, prompt, planned, _ in rows:
        digests[seq].add(digest)
        if n == 0:
            assert (size, pixels, digest, image_tokens) == (0, 0, None, None)
            assert prompt == planned  # one word a token, counted as words
            continue
        assert n in (1, 2) and size > 0 and digest is not None
        # The pixels decompose into the two sizes; the rule gives their tokens.
        if n == 1:
            expected = TOKENS_BY_PIXELS[pixels]
        else:
            pairs = {
                a + b: TOKENS_BY_PIXELS[a] + TOKENS_BY_PIXELS[b]
                for a in TOKENS_BY_PIXELS
                for b in TOKENS_BY_PIXELS
            }
            expected = pairs[pixels]
        assert prompt == planned + expected  # text plus the image tokens, in prompt_tokens
        assert image_tokens == (expected if provider == "split" else None)
    carrying = sum(1 for row in rows if row[2]) // 2
    assert 0 < carrying < 40  # about half (fraction 0.5)
    # Request n carries the same images for both providers.
    assert all(len(found) == 1 for found in digests.values())
    stages = {row["provider"]: row for row in report["stages"]}
    assert stages["split"]["image_requests"] == stages["summed"]["image_requests"] == carrying
    assert stages["split"]["image_share_pct"] == pytest.approx(100 * carrying / 40)
    assert (
        stages["split"]["image_tokens_mean"] > 255 and stages["summed"]["image_tokens_mean"] is None
    )
    assert stages["split"]["image_bytes_mean"] > 0
    text = con.execute(
        "SELECT avg(planned_prompt_tokens) FROM requests WHERE provider = 'split'"
    ).fetchone()
    assert text is not None
    assert stages["split"]["text_prompt_tokens_mean"] == pytest.approx(text[0])
    assert stages["summed"]["text_prompt_tokens_mean"] != pytest.approx(text[0])  # text-only rows
    # A run no request of which carried images keeps its stage rows as they were.
    plain_rows = [{"provider": "split", "stage": 0, "region": "local"}]
    assert with_images(con, "no-such-run", plain_rows) is plain_rows


def test_text_calibration_stays_within_tolerance_with_images(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    providers = [
        _simulated("split", prompt_token_ratio=1.3),
        _simulated("summed", prompt_token_ratio=1.3, report_image_tokens=False),
    ]
    result, _ = _run(tmp_path, tokenbench, _scenario("images-calibrated", providers, True))
    for row in _report(result)["stages"]:
        assert row["image_requests"] > 0
        assert row["prompt_length_source"] == "calibrated"
        assert row["prompt_tokens_per_word"] == pytest.approx(1.3, rel=0.03), row
        assert abs(row["prompt_length_error_pct"]) < 2.0, row


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


def test_two_providers_get_byte_identical_images(
    tmp_path: Path, tokenbench: Callable[..., CliResult], fake: FakeProviders
) -> None:
    base = fake.url("ok", "/v1")
    providers = [
        {
            "name": name,
            "kind": "openai",
            "base_url": base,
            "model": f"{name}-model",
            "api_key_env": "FAKE_KEY",
        }
        for name in ("a", "b")
    ]
    scenario = _scenario("images-wire", providers, calibrate=False)
    scenario["workload"]["images"] = _images(format="jpeg", quality=70, detail="low")
    scenario["load"]["requests_per_level"] = 12
    env = {"FAKE_KEY": KEY, "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true"}
    result, db = _run(tmp_path, tokenbench, scenario, env)
    _report(result)
    sent: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for request in fake.requests:
        body = json.loads(request["body"])
        (message,) = body["messages"]
        content = message["content"]
        if isinstance(content, str):
            sent[body["model"]][content] = []
            continue
        text, *parts = content
        assert text["type"] == "text"
        for part in parts:
            assert part["type"] == "image_url" and part["image_url"]["detail"] == "low"
            assert part["image_url"]["url"].startswith("data:image/jpeg;base64,")
        sent[body["model"]][text["text"]] = [part["image_url"]["url"] for part in parts]
    a, b = sent["a-model"], sent["b-model"]
    assert len(a) == len(b) == 12
    assert a == b  # the same prompts, each with byte-identical images
    assert any(a.values()) and not all(a.values())
    con = duckdb.connect(str(db), read_only=True)
    pairs = con.execute(
        "SELECT count(DISTINCT image_digest), count(*) FROM requests WHERE images > 0 GROUP BY seq"
    ).fetchall()
    assert pairs and all(row == (1, 2) for row in pairs)


def test_images_over_the_pixel_bound_exit_2_naming_the_field(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = _scenario("images-too-big", [_simulated("sim")], calibrate=False)
    scenario["workload"]["images"] = {"width": 4096, "height": 4096}
    result, _ = _run(tmp_path, tokenbench, scenario)
    assert result.code == 2, result.stdout + result.stderr
    assert "workload.images" in result.stderr and "8,388,608" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_pillow_the_run_stops_with_the_install_command(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    shim = tmp_path / "shim" / "PIL"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('Pillow hidden by the test')\n")
    scenario = _scenario("images-no-pillow", [_simulated("sim")], calibrate=False)
    result, db = _run(tmp_path, tokenbench, scenario, {"PYTHONPATH": str(shim.parent)})
    assert result.code == 2, result.stdout + result.stderr
    assert "pip install 'tokenbench[images]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not db.exists()  # stopped before anything started
