"""``gpuroute`` command line: the parser and the dispatch. Each command is one module of this package
(``route``, ``info``, ``sssp``, ``contract``, ``tree``, ``table``, ``partition``, ``customize``, ``build``,
``serve``, ``warmup``, ``trip``, ``accessibility``, ``match``, ``timeprofile``) that parses its arguments, calls one stage or service of the library
and formats the answer.

Customizable Route Planning runs as stages on one overlay directory (:mod:`gpuroute.pipeline.overlay_dir`):
``gpuroute partition GRAPH -o DIR``, ``gpuroute customize DIR --metric M [--traffic CSV]``, then
``gpuroute route --overlay DIR``; a customization made from another partition is refused.

Exit codes: 0 success; 1 no route between the two points; 2 bad input or any other failure (missing
file, unknown graph name, point outside the network, malformed point, ``--device gpu`` without a GPU,
unreadable file, a header that announces more than the file holds, ...): one line on stderr, never a
traceback (``-v`` logs the traceback). Long stages (``contract``, ``partition``, ``customize``, ``build``)
print one stderr line when they start and one when they end (:data:`gpuroute.cli.common.STAGE_LINE`);
a failure's line comes last.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from . import (
    accessibility,
    build,
    contract,
    customize,
    info,
    match,
    partition,
    route,
    serve,
    sssp,
    table,
    timeprofile,
    tree,
    trip,
    warmup,
)
from .common import EXIT_BAD_INPUT, CLIError, Parser, UsageError, join_coordinate_args, log, one_line


def build_parser():
    """The ``gpuroute`` argument parser (subcommands ``route``, ``info``, ``sssp``, ``contract``, ``tree``,
    ``table``, ``partition``, ``customize``)."""
    from .. import __version__

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log debug information to stderr")
    p = Parser(prog="gpuroute", description="Exact route planning on road networks (GPU + CPU).",
               epilog="Graphs: a shipped name (ny, ny-time, monaco) or a file (.gr, .gr.gz, .graph, .osm.pbf, "
                      ".csv, _net.tntp) or a saved-graph directory. Inside the project's .venv the command is "
                      ".venv/bin/gpuroute.")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log debug information to stderr")
    p.add_argument("--version", action="version", version=f"gpuroute {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in (route, info, sssp, contract, tree, table, partition, customize, build, serve, warmup, trip, accessibility,
                match, timeprofile):
        mod.add_parser(sub, common)
    return p


@contextlib.contextmanager
def _logging_to_stderr(verbose):
    logger = logging.getLogger("gpuroute")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _message(e):
    if isinstance(e, FileNotFoundError) and e.filename and e.strerror:
        return f"{e.strerror}: {e.filename}"
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    if isinstance(e, MemoryError):
        return "out of memory" + (f": {e}" if str(e) else "")
    if isinstance(e, (CLIError, ValueError, OSError, ImportError, LookupError, ArithmeticError, TypeError)):
        return str(e) or type(e).__name__
    return f"{type(e).__name__}: {e}"


def main(argv=None) -> int:
    """Run ``gpuroute`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(join_coordinate_args(argv))
    except UsageError as e:
        print(e, file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_BAD_INPUT)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT

    prog = f"gpuroute {args.command}"
    with _logging_to_stderr(args.verbose):
        try:
            return args.func(args)
        except BrokenPipeError:  # e.g. `gpuroute route | head`: stop quietly, as other command-line tools do
            with contextlib.suppress(OSError, ValueError, AttributeError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            return 128 + 13  # SIGPIPE
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130
        except Exception as e:  # every failure: one line, exit 2 (-v logs the traceback)
            log.debug("%s failed", prog, exc_info=True)
            print(f"{prog}: error: {one_line(_message(e))}", file=sys.stderr)
            return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
