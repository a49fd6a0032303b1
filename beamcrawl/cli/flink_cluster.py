"""``beamcrawl flink-cluster start|stop|status``: a Flink session cluster on this machine.

    beamcrawl flink-cluster start --dir DIR [--rest-port 8081] [--rpc-port 6123] [--pool-port 50000]
                                  [--task-managers 2] [--slots 2]
    beamcrawl flink-cluster status --dir DIR
    beamcrawl flink-cluster stop --dir DIR

``start`` prints the Beam options that send a crawl's rounds to the cluster. The SDK workers
get the environment ``start`` runs in: start it where ``BIGTABLE_EMULATOR_HOST`` (or the
store's credentials) is set.
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser


def _parser() -> OneLineArgumentParser:
    from beamcrawl.pipelines.flink_cluster import ClusterConfig

    defaults = ClusterConfig()
    parser = OneLineArgumentParser(prog="beamcrawl flink-cluster", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument(
        "--dir", required=True, metavar="DIR", help="The cluster's folder: its config, logs/ and state."
    )
    numbers = (
        ("--rest-port", "rest_port", "P", "The JobManager's REST port, the crawl's --flink_master"),
        ("--rpc-port", "rpc_port", "P", "The JobManager's RPC port"),
        ("--pool-port", "pool_port", "P", "The SDK worker pool's port, the crawl's --environment_config"),
        ("--task-managers", "task_managers", "N", "TaskManagers to start"),
        ("--slots", "slots", "N", "Task slots per TaskManager"),
    )
    for flag, field, metavar, what in numbers:
        default = getattr(defaults, field)
        parser.add_argument(flag, type=int, default=default, metavar=metavar, help=f"{what} (default {default}).")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    from beamcrawl.pipelines import flink_cluster
    from beamcrawl.pipelines.runners import RunnerSetupError

    if args.action == "stop":
        stopped = flink_cluster.stop(args.dir)
        print(f"flink-cluster: {'stopped' if stopped else 'no cluster was running from'} {args.dir}")
        return 0
    if args.action == "status":
        state = flink_cluster.status(args.dir)
        print(json.dumps(state, indent=2))
        return 0 if state["running"] else 3
    cfg = flink_cluster.ClusterConfig(
        rest_port=args.rest_port, rpc_port=args.rpc_port, pool_port=args.pool_port,
        task_managers=args.task_managers, slots=args.slots,
    )  # fmt: skip
    try:
        state = flink_cluster.start(args.dir, cfg)
    except RunnerSetupError as exc:
        print(f"beamcrawl flink-cluster: error: {exc}", file=sys.stderr)
        return 2
    overview = state.get("overview", {})
    print(f"flink-cluster: Flink {overview.get('flink-version', '?')} with {overview.get('taskmanagers', '?')} "
          f"TaskManagers, {overview.get('slots-total', '?')} slots; logs in {args.dir}/logs")  # fmt: skip
    print("crawl with: " + " ".join(flink_cluster.submit_args(state)))
    return 0
