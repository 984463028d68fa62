"""Median latency added by API-key authentication, 32 active keys, warm and cold verification cache.

Run: .venv/bin/python benchmarks/bench_backend_auth.py [--requests N] [--cold N] [--rounds R]
Writes benchmarks/results/backend_auth.json and benchmarks/results/backend_auth.png.

Method: one backend app (SQLite in a temp dir, production bcrypt cost) gets two extra routes that do
nothing, one open and one behind ``require_api_key``. Requests alternate between them in-process (ASGI,
no sockets); "added latency" is median(guarded) - median(open). Cold: the verification cache is
cleared before every request, so bcrypt runs over the active keys until the presented one matches
(presented keys drawn uniformly from the 32: one bootstrap key, 31 generated).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from fastapi import APIRouter, Depends
from hvsync_backend.app import create_app
from hvsync_backend.auth.dependency import require_api_key
from hvsync_backend.config import Settings

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = 32


async def measure(args: argparse.Namespace) -> dict[str, object]:
    data_dir = Path(tempfile.mkdtemp(prefix="hvsync-bench-"))
    app = create_app(Settings(data_dir=data_dir, bcrypt_rounds=args.rounds))
    bench = APIRouter()
    bench.add_api_route("/bench/open", lambda: {"ok": True}, methods=["GET"])
    bench.add_api_route(
        "/bench/guarded", lambda: {"ok": True}, methods=["GET"], dependencies=[Depends(require_api_key)]
    )
    app.include_router(bench)
    ctx = app.state.context
    # As deployed: the plugin's bootstrap key (64 random characters) plus generated keys.
    bootstrap = secrets.token_urlsafe(48)
    ctx.keys.register_bootstrap(bootstrap, "plugin")
    raw_keys = [bootstrap] + [ctx.keys.create(label=f"bench-{i}")[1] for i in range(KEYS - 1)]
    assert sum(k.is_active for k in ctx.keys.list_keys()) == KEYS

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

        async def timed(path: str, key: str | None) -> float:
            headers = {"X-Service-API-Key": key} if key else {}
            start = time.perf_counter()
            r = await client.get(path, headers=headers)
            elapsed = time.perf_counter() - start
            assert r.status_code == 200, r.text
            return elapsed * 1000

        for key in raw_keys:  # warm: every key verified once, so every key is cached
            await timed("/bench/guarded", key)
        for _ in range(200):
            await timed("/bench/open", None)
        open_ms, warm_ms = [], []
        rng = random.Random(7)
        for _ in range(args.requests):
            open_ms.append(await timed("/bench/open", None))
            warm_ms.append(await timed("/bench/guarded", rng.choice(raw_keys)))

        cold_ms, cold_open_ms = [], []
        for _ in range(args.cold):
            ctx.keys.cache.clear()
            cold_open_ms.append(await timed("/bench/open", None))
            cold_ms.append(await timed("/bench/guarded", rng.choice(raw_keys)))

        wrong_ms = []  # worst case: a never-seen wrong key is checked against every active key
        for i in range(args.wrong):
            ctx.lockout.record_success("127.0.0.1")
            start = time.perf_counter()
            r = await client.get("/bench/guarded", headers={"X-Service-API-Key": f"wrong-{i}-" + "w" * 40})
            wrong_ms.append((time.perf_counter() - start) * 1000)
            assert r.status_code == 401, r.text

    med = statistics.median
    result = {
        "benchmark": "backend_auth",
        "active_keys": KEYS,
        "bcrypt_rounds": args.rounds,
        "database": "sqlite",
        "requests_warm": args.requests,
        "requests_cold": args.cold,
        "median_open_ms": round(med(open_ms), 4),
        "median_guarded_warm_ms": round(med(warm_ms), 4),
        "median_added_warm_ms": round(med(warm_ms) - med(open_ms), 4),
        "p95_added_warm_ms": round(statistics.quantiles(warm_ms, n=20)[18] - med(open_ms), 4),
        "median_guarded_cold_ms": round(med(cold_ms), 3),
        "median_added_cold_ms": round(med(cold_ms) - med(cold_open_ms), 3),
        "median_wrong_key_cold_ms": round(med(wrong_ms), 1) if wrong_ms else None,
        "target_added_warm_ms": 2.0,
        "meets_target": med(warm_ms) - med(open_ms) < 2.0,
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    ctx.engine.dispose()
    return result | {"_samples": {"open": open_ms, "warm": warm_ms, "cold": cold_ms}}


def plot(result: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["_samples"]
    assert isinstance(samples, dict)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.boxplot([samples["open"], samples["warm"]], showfliers=False)
    ax1.set_xticks([1, 2], ["no auth", f"key auth, warm cache\n({result['active_keys']} active keys)"])
    ax1.set_ylabel("request latency (ms)")
    ax1.set_title(f"added median: {result['median_added_warm_ms']:.3f} ms (target < 2 ms)")
    ax2.hist(samples["cold"], bins=20, color="tab:red")
    ax2.set_xlabel("request latency (ms)")
    ax2.set_title(
        f"cold cache, bcrypt cost {result['bcrypt_rounds']}: median {result['median_guarded_cold_ms']:.0f} ms"
    )
    fig.suptitle("hvsync backend: cost of API-key authentication (in-process ASGI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000, help="warm request pairs")
    parser.add_argument("--cold", type=int, default=12, help="cold-cache requests")
    parser.add_argument("--wrong", type=int, default=2, help="never-seen wrong keys (bcrypt over all keys)")
    parser.add_argument("--rounds", type=int, default=12, help="bcrypt cost (production default 12)")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(result, RESULTS / "backend_auth.png")
    result.pop("_samples")
    (RESULTS / "backend_auth.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
