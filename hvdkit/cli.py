"""The ``hvdkit`` console script."""

from __future__ import annotations

import argparse
import importlib
import sys


def main(argv: list[str] | None = None) -> int:
    """The ``hvdkit`` command: doctor, build-horovod, elastic-local, slurm-gloo, plan."""
    parser = argparse.ArgumentParser(prog="hvdkit", description="Horovod data-parallel training toolkit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="show versions, Horovod's build matrix and problems with their fixes")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--allreduce", action="store_true",
                   help="also measure this machine's allreduce bandwidth (a short 2-process horovodrun job) against "
                        "the transport's own and warn when it is far below")

    p = sub.add_parser("build-horovod", help="build (or reuse from cache) and install the patched Horovod wheel")
    p.add_argument("--force", action="store_true", help="rebuild even when a cached wheel matches")
    p.add_argument("--print-key", action="store_true", help="print the cache key and build inputs, then exit")

    p = sub.add_parser("checkpoint", help="checkpoint folders: convert checkpoints of older hvdkit formats")
    c = p.add_subparsers(dest="action", required=True).add_parser(
        "convert", help="rewrite format-2/3 checkpoints of SRC as format 4 (safetensors + JSON), in place or into DST")
    c.add_argument("src", help="the checkpoint folder")
    c.add_argument("dst", nargs="?", help="where to write the converted folder (default: SRC, in place)")
    c.add_argument("--trust-pickle", action="store_true",
                   help="also read pickled payloads (pickle runs code the file names: trusted folders only)")

    argv = sys.argv[1:] if argv is None else argv
    # Their options and the training command go on verbatim, to the module's own parser (hvdkit plan --help).
    for name, module, about in [
        ("elastic-local", "hvdkit.tools.elastic_local",
         "elastic horovodrun on one machine (two local 'hosts', no hangs)"),
        ("slurm-gloo", "hvdkit.tools.slurm_gloo",
         "Gloo-only Horovod job over a Slurm allocation (rendezvous + srun)"),
        ("plan", "hvdkit.tools.plan",
         "predicted communication per step of ring, tree and parameter-server reductions on a "
                                "cluster you describe, and what to choose"),
    ]:
        sub.add_parser(name, help=about, add_help=False).add_argument("rest", nargs=argparse.REMAINDER)
        if argv[:1] == [name]:
            return importlib.import_module(module).main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from hvdkit.tools.doctor import main as doctor_main

        return doctor_main(as_json=args.json, allreduce=args.allreduce)
    if args.command == "build-horovod":
        import json
        from dataclasses import asdict

        from hvdkit.tools.build.horovod_wheel import BuildError, cache_root, collect_inputs, ensure_installed

        if args.print_key:
            inputs = collect_inputs()
            print(json.dumps({"key": inputs.key, "cache": str(cache_root()), "inputs": asdict(inputs)}, indent=2))
            return 0
        try:
            ensure_installed(force_rebuild=args.force)
        except BuildError as exc:
            print(f"hvdkit build-horovod: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "checkpoint":
        from pathlib import Path

        from hvdkit.tools.checkpoint_convert import convert

        return convert(Path(args.src), None if args.dst is None else Path(args.dst), trust_pickle=args.trust_pickle)
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":
    sys.exit(main())
