"""``gpuroute timeprofile DIR [FILE]``: store a time profile in a dataset directory, so that ``gpuroute serve
DIR`` and :meth:`gpuroute.engine.Engine.open` load it for ``depart_at`` without ``--time-profile``
(:func:`gpuroute.engine.timeslots.store_profile`: validated fully against the dataset -- every line, every key
in the graph, every slot's metric -- then written atomically as ``DIR/time_profile.csv``; a bad file leaves the
directory as it was). Without FILE: the profile stored there; ``--remove`` deletes it. ``--time-profile FILE``
of ``serve``, ``route`` and ``trip`` still overrides the stored one."""
from __future__ import annotations

import json
import os

from .common import EXIT_OK, CLIError, print_rows, progress, stage


def run(args):
    from ..engine import EngineError
    from ..engine import timeslots as ts
    from ..engine.dataset import read_manifest

    d = args.dataset
    read_manifest(d)  # a dataset directory (FileNotFoundError / DatasetError name it)
    if args.remove and args.file is not None:
        raise CLIError("give FILE or --remove, not both")
    if args.remove:
        gone = ts.remove_stored_profile(d)
        print(f"gpuroute timeprofile: {'removed ' + os.path.join(d, ts.STORED) if gone else 'no time profile stored in ' + d}")
        return EXIT_OK
    if args.file is None:
        path = ts.stored_profile(d)
        if path is None:
            raise CLIError(f"{d}: no time profile stored (gpuroute timeprofile {d} FILE stores one)")
        info = ts.TimeProfile.read(path).info()
    else:
        try:
            with stage("gpuroute timeprofile", f"checking {args.file} against {d}"), progress("checking"):
                info = ts.store_profile(d, args.file)
        except (ts.TimeProfileError, EngineError) as e:
            raise CLIError(f"{e} ({d} is left as it was)") from None
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    print_rows([("stored", info["file"]), ("timezone", info["timezone"]),
                ("slots", f"{info['slot_minutes']} minutes"), ("days", ", ".join(info["days"])),
                ("calendar", f"{info['valid_from'] or '...'} to {info['valid_until'] or '...'}"),
                ("rows", f"{info['rows']} ({info['variants']} distinct slot metrics)")])
    return EXIT_OK


def add_parser(sub, common):
    t = sub.add_parser("timeprofile", parents=[common], help="store a time profile in a dataset directory",
                       description="Store a time profile (CSV, or Parquet with pandas + pyarrow) in a dataset "
                                   "directory: checked against the dataset first, then written atomically as "
                                   "DIR/time_profile.csv; gpuroute serve DIR, route and trip load it for "
                                   "depart_at/--depart-at (their --time-profile overrides it). Without FILE: "
                                   "show the stored profile.")
    t.add_argument("dataset", metavar="DIR", help="a dataset directory (gpuroute build GRAPH -o DIR)")
    t.add_argument("file", nargs="?", default=None, metavar="FILE", help="the time profile to store")
    t.add_argument("--remove", action="store_true", help="delete the stored time profile")
    t.add_argument("--json", action="store_true", help="print the profile's summary as JSON")
    t.set_defaults(func=run)
    return t
