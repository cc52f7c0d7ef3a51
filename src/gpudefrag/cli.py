"""The ``gpudefrag`` command line: one parser, each command group in its own module
(``cli_fgd``: calib, run; ``cli_bench``: bench; ``cli_suite1``: suite 1a/1b, sim; ``cli_suite2``, ``cli_suite3``;
``cli_gangsim``; ``cli_compare``; ``cli_import``; ``cli_synth``; ``cli_data``; ``cli_k8s``: scheduler, defrag, k8s-demo, k8s-bench; ``cli_plan``).
Each command parses its options (every value checked against its declared range,
:mod:`gpudefrag.settings`) and calls one function.

Exit codes: 0 success; 1 a gate or check failed; 2 bad input or usage (one clear line on
stderr, no traceback); 141 when the reader of stdout went away (``| head``), quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from gpudefrag import __version__
from gpudefrag.errors import EXIT_USAGE, GpudefragError

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a Unix tool killed by a closed pipe exits with."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, ``<prog>: error: <message>``,
    with exit code 2 (no usage block).  Unrecognized arguments are reported by the (sub)command
    that did not recognize them: ``gpudefrag suite 1b: error: unrecognized arguments: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())}\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, _EXTRAS_PROG):  # the innermost parser sets it first
            setattr(namespace, _EXTRAS_PROG, self.prog)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            prog = getattr(namespace, _EXTRAS_PROG, self.prog)
            self.exit(EXIT_USAGE, f"{prog}: error: unrecognized arguments: {' '.join(extras)}\n")
        return namespace


_EXTRAS_PROG = "_unrecognized_by"


def build_parser() -> argparse.ArgumentParser:
    from gpudefrag.cli_bench import add_bench_command
    from gpudefrag.cli_compare import add_compare_command
    from gpudefrag.cli_data import add_data_commands
    from gpudefrag.cli_fgd import add_fgd_commands
    from gpudefrag.cli_gangsim import add_gangsim_command
    from gpudefrag.cli_import import add_import_command
    from gpudefrag.cli_k8s import add_k8s_commands
    from gpudefrag.cli_plan import add_plan_command
    from gpudefrag.cli_suite1 import add_sim_command, add_suite_commands
    from gpudefrag.cli_synth import add_synth_command

    parser = OneLineParser(
        prog="gpudefrag",
        description="GPU-cluster scheduling and defragmentation: see what your cluster wastes, plan the "
        "moves that free room for blocked pods, and compare schedulers on real traces.",
    )
    parser.add_argument("--version", action="version", version=f"gpudefrag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_plan_command(sub)
    add_k8s_commands(sub)
    add_gangsim_command(sub)
    add_compare_command(sub)
    add_import_command(sub)
    add_synth_command(sub)
    add_sim_command(sub)
    add_suite_commands(sub)
    add_fgd_commands(sub)
    add_bench_command(sub)
    add_data_commands(sub)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        code = int(args.func(args))
        sys.stdout.flush()
        return code
    except GpudefragError as exc:
        print(f"gpudefrag: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("gpudefrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
