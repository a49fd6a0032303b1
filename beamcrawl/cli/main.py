"""The beamcrawl command.

    beamcrawl crawl --seeds FILE --out DIR [--rounds N] [--store URI] [--resolve HOSTGLOB=IP]...
                    [--allow-private-networks] [--min-delay S] [--max-delay S] [--round-window S]
                    [--user-agent UA] [--robots-token TOKEN] [--ip-delay S] [--dns-ttl S]
                    [--blocklist FILE] [--signing-key FILE --signature-agent URL]
                    [Beam options: --runner ...]
    beamcrawl hosts set-policy HOST (--store URI | --crawl OUT_DIR) [--min-delay-ms N]
                    [--pause-until T] [--block | --unblock]
    beamcrawl hosts show HOST (--store URI | --crawl OUT_DIR)
    beamcrawl hosts release HOST|URL (--store URI | --crawl OUT_DIR)
    beamcrawl submit URL... [--file F] --priority high|normal|low --reason TEXT
                    [--kind auto|page|sitemap] [--allow-private-networks] (--store URI | --crawl OUT_DIR)
    beamcrawl export urls|hosts|quarantine --out DIR (--store URI | --crawl OUT_DIR)
    beamcrawl store init|info --store bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]
    beamcrawl keys generate --out DIR | keys directory DIR | keys serve DIR [--bind ADDR] [--port N]
    beamcrawl keys rotate DIR [--activate-after S] [--overlap S] | keys retire DIR KEYID | keys list DIR [--json]
    beamcrawl api (--crawl OUT_DIR | --store URI [--reports DIR]) [--bind ADDR] [--port P] [--token-file F]
    beamcrawl report OUT_DIR [--to DIR]
    beamcrawl status --crawl OUT_DIR [--json]   (is a round running; its live counters)
    beamcrawl demo [--out DIR] [--hosts N] [--rounds N]   (DIR: new, empty, or a previous demo's)
    beamcrawl flink-cluster start|stop|status --dir DIR [--rest-port P] [--task-managers N]
    beamcrawl simweb --port P --hosts N --log FILE --truth FILE
    beamcrawl simweb audit LOG TRUTH [--min-delay S] [--token TOKEN]
    beamcrawl normalize URL...
    beamcrawl robots-check --robots FILE --agent TOKEN URL...

Quick tools (normalize, robots-check) import neither Beam nor the pipeline, so they answer
in well under a second; the heavy imports happen inside the commands that need them.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser, add_crawl_arguments, config_from_args, positive_int


def crawl_parser() -> OneLineArgumentParser:
    """The ``crawl`` command's parser: its own options, then the table's (cli/args.py)."""
    parser = OneLineArgumentParser(
        prog="beamcrawl crawl",
        usage="beamcrawl crawl --seeds FILE --out DIR [options] [Beam options: --runner ...]\n"
        "       beamcrawl crawl --out DIR [options]   (later runs of a seeded crawl: resume)",
        description="Crawl politely in rounds, each round one Beam job. Beam's pipeline options go "
        "to Beam (--runner, --direct_num_workers, --flink_master, ...); any other argument is refused.",
    )
    parser.add_argument(
        "--seeds", metavar="FILE",
        help="File of seed URLs, one per line ('#' starts a comment at a line's start or after "
        "whitespace). Needed to start a crawl; a rerun on the same --out resumes without it.",
    )  # fmt: skip
    parser.add_argument("--rounds", type=positive_int, default=1, metavar="N", help="Rounds to run (default 1).")
    parser.add_argument(
        "--exit-when-idle", action="store_true",
        help="When no URL is due, say when the next one is and exit 0, rather than wait for it "
        "(for scheduled runs). A wait is never counted as a round.",
    )  # fmt: skip
    add_crawl_arguments(parser)
    return parser


def _stray_argument(beam_args: list[str]) -> str | None:
    """A bare word that is no option's value (Beam would ignore it silently)."""
    previous = ""
    for arg in beam_args:
        if not arg.startswith("-") and not (previous.startswith("--") and "=" not in previous):
            return arg
        previous = arg
    return None


def cmd_crawl(argv: Sequence[str]) -> int:
    parser = crawl_parser()
    args, beam_args = parser.parse_known_args(list(argv))
    from beamcrawl.pipelines.sdk_worker import leave_out_for_runner

    leave_out_for_runner(beam_args)  # before anything imports Beam, which imports the clients it finds
    from beamcrawl.pipelines.options import unknown_argument

    unknown = unknown_argument(beam_args, parser)  # a typo must not crawl with a default instead
    if unknown is not None:
        parser.error(unknown)
    if not args.out:
        parser.error("--out is required")
    stray = _stray_argument(beam_args)
    if stray is not None:
        parser.error(f"unexpected argument {stray!r}")

    from beamcrawl.pipelines.crawl_errors import CrawlError, RoundInterrupted
    from beamcrawl.pipelines.crawl import crawl
    from beamcrawl.pipelines.seeding import read_seeds

    from beamcrawl.pipelines.out_folder import check_folder
    from beamcrawl.pipelines.runners import RunnerSetupError, check_runner, check_store_for_runner, prepare
    from beamcrawl.stores.interface import StoreError

    # force: the option checks above parse with Beam, which logs through the root logger; that
    # first record configured it at WARNING, and the round's INFO lines (the crawl log's too)
    # would be lost.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    for noisy in ("apache_beam", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        check_runner(beam_args)  # an argument like any other: named before any folder is looked at
        cfg = config_from_args(args)
        seeds = (
            read_seeds(args.seeds, cfg.shape_rules(), allow_private=cfg.allow_private_networks, resolve=cfg.resolve)
            if args.seeds
            else []
        )
        # Before a runner is set up: a Flink job server writes its log under --out. (A gs://
        # folder is checked by the crawl, once its credentials are known to be there.)
        if "://" not in cfg.out:
            check_folder(cfg.out, cfg.store, bool(seeds))
    except (CrawlError, ValueError, RunnerSetupError) as exc:
        for line in str(exc).splitlines():  # a seeds file: one line per bad seed line
            print(f"beamcrawl crawl: error: {line}", file=sys.stderr)
        return 2
    try:
        check_store_for_runner(cfg.store, beam_args)
        runner_args = prepare(beam_args)
    except RunnerSetupError as exc:
        print(f"beamcrawl crawl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("beamcrawl crawl: interrupted before the first round", file=sys.stderr)
        return INTERRUPTED
    from beamcrawl.pipelines.flink import job_server

    try:
        with job_server(runner_args, cfg.out, announce=logging.getLogger("beamcrawl.flink").info) as runner_args:
            crawl(cfg, args.rounds, seeds, runner_args, exit_when_idle=args.exit_when_idle)
    except RunnerSetupError as exc:
        print(f"beamcrawl crawl: error: {exc}", file=sys.stderr)
        return 2
    except RoundInterrupted as exc:
        return _interrupted(str(exc))
    except KeyboardInterrupt:
        return _interrupted("interrupted outside a round's run; rerun to go on")
    except CrawlError as exc:
        from beamcrawl.pipelines.out_folder import FolderRefused

        print(f"beamcrawl crawl: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, FolderRefused) else 1
    except StoreError as exc:  # the store refused a round (a damaged meta row, say): none committed
        print(f"beamcrawl crawl: error: {exc}", file=sys.stderr)
        return 1
    return 0


# The shell's status for a process ended by SIGINT (128 + 2).
INTERRUPTED = 130


def _interrupted(message: str) -> int:
    """Says in one line that Ctrl-C stopped the crawl, and leaves without Beam's noise.

    The runner's worker threads may still be unwinding (and logging the interrupt, at
    length, when they notice it). The lease is released and the store is as a crash would
    leave it (a rerun redoes the round, or finishes its commit), so the process ends here
    rather than waiting for them.
    """
    print(f"beamcrawl crawl: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    logging.disable(logging.CRITICAL)
    os._exit(INTERRUPTED)


def cmd_normalize(argv: Sequence[str]) -> int:
    parser = OneLineArgumentParser(prog="beamcrawl normalize", description="Normalise URLs and print fingerprints.")
    parser.add_argument("urls", nargs="+", metavar="URL")
    args = parser.parse_args(list(argv))
    from beamcrawl.cli.quicktools import normalize_cmd

    return normalize_cmd(args.urls, sys.stdout)


def cmd_robots_check(argv: Sequence[str]) -> int:
    parser = OneLineArgumentParser(prog="beamcrawl robots-check", description="Check URLs against a robots.txt file.")
    parser.add_argument("--robots", required=True, metavar="FILE")
    parser.add_argument("--agent", required=True, metavar="TOKEN")
    parser.add_argument("urls", nargs="+", metavar="URL")
    args = parser.parse_args(list(argv))
    from beamcrawl.cli.quicktools import robots_check_cmd

    return robots_check_cmd(args.robots, args.agent, args.urls, sys.stdout, sys.stderr)


def cmd_simweb(argv: Sequence[str]) -> int:
    if argv and argv[0] == "audit":  # beamcrawl simweb audit LOG TRUTH
        from beamcrawl.simweb.audit_cli import main as audit_main

        return audit_main(list(argv[1:]))
    from beamcrawl.simweb.server import main as simweb_main

    return simweb_main(list(argv))


def cmd_hosts(argv: Sequence[str]) -> int:
    from beamcrawl.cli.hosts import main as hosts_main

    return hosts_main(list(argv))


def cmd_submit(argv: Sequence[str]) -> int:
    from beamcrawl.cli.submit import main as submit_main

    return submit_main(list(argv))


def cmd_export(argv: Sequence[str]) -> int:
    from beamcrawl.cli.export import main as export_main

    return export_main(list(argv))


def cmd_store(argv: Sequence[str]) -> int:
    from beamcrawl.cli.store_admin import main as store_main

    return store_main(list(argv))


def cmd_keys(argv: Sequence[str]) -> int:
    from beamcrawl.cli.keys import main as keys_main

    return keys_main(list(argv))


def cmd_api(argv: Sequence[str]) -> int:
    from beamcrawl.cli.api import main as api_main

    return api_main(list(argv))


def cmd_report(argv: Sequence[str]) -> int:
    from beamcrawl.cli.report import main as report_main

    return report_main(list(argv))


def cmd_status(argv: Sequence[str]) -> int:
    from beamcrawl.cli.status import main as status_main

    return status_main(list(argv))


def cmd_demo(argv: Sequence[str]) -> int:
    from beamcrawl.cli.demo import main as demo_main

    return demo_main(list(argv))


def cmd_flink_cluster(argv: Sequence[str]) -> int:
    from beamcrawl.cli.flink_cluster import main as flink_cluster_main

    return flink_cluster_main(list(argv))


COMMANDS = {
    "crawl": cmd_crawl,
    "demo": cmd_demo,
    "flink-cluster": cmd_flink_cluster,
    "hosts": cmd_hosts,
    "export": cmd_export,
    "submit": cmd_submit,
    "store": cmd_store,
    "keys": cmd_keys,
    "api": cmd_api,
    "report": cmd_report,
    "status": cmd_status,
    "simweb": cmd_simweb,
    "normalize": cmd_normalize,
    "robots-check": cmd_robots_check,
}


def usage() -> str:
    """The top-level help: the synopsis of the module docstring, as plain text."""
    synopsis = __doc__.split("\n\n")[1]
    return f"usage:\n{synopsis}\n\n'beamcrawl COMMAND --help' lists a command's options."


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from beamcrawl import __version__

        print(f"beamcrawl {__version__}")
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"beamcrawl: error: unknown command {argv[0]!r} (try: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    try:
        status = command(argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early (``beamcrawl hosts show ... | head``): that is no error
        # of ours. Output goes nowhere from here, so that the exit's own flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    return status


# The shell's status for a process ended by SIGPIPE (128 + 13), as ``yes | head`` leaves it.
BROKEN_PIPE = 141


if __name__ == "__main__":
    sys.exit(main())
