"""`gslbd endpoints add|remove|patch SERVICE ADDRESS [--site S] [--weight N] ...`: the endpoint overlay of
a running instance, through its admin API (POST/DELETE/PATCH /api/v1/services/{name}/endpoints), as
`gslbd admin` does admin states."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from typing import Any

from gslbd.cli.admin import TOKEN_ENV, ApiError, _api_option, _request

# option, metavar, endpoint key, how the value is read, help
_KEYS: tuple[tuple[str, str, str, type, str], ...] = (
    ("--site", "SITE", "site", str, "the endpoint's site"),
    ("--weight", "N", "weight", int, "its weight (0 to 1000)"),
    ("--priority", "N", "priority", int, "its priority"),
    ("--check", "PROFILE", "check", str, "a check profile of the config, or none"),
    ("--probe-address", "IP", "probe_address", str, "the address its probes go to"),
    ("--admin", "STATE", "admin", str, "its admin state in the config's sense (obey, up, down)"),
)
_VERBS = {"add": "added", "remove": "removed", "patch": "patched"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `endpoints` to the gslbd command line."""
    parser = sub.add_parser(
        "endpoints",
        help="add, remove or re-weight endpoints of a running gslbd (kept as an overlay on the config)",
    )
    actions = parser.add_subparsers(dest="endpoints_command", metavar="ACTION")
    actions.required = True
    for action, what in (
        ("add", "add an endpoint to a service"),
        ("patch", "replace keys of an endpoint (e.g. --weight 5)"),
        ("remove", "remove an endpoint"),
    ):
        one = actions.add_parser(action, help=what, description=f"{what.capitalize()} (docs/api.md).")
        one.add_argument("service", metavar="SERVICE", help="e.g. app.gslb.example.com")
        one.add_argument("address", metavar="ADDRESS", help="the endpoint's address")
        if action != "remove":
            for option, metavar, _, kind, text in _KEYS:
                one.add_argument(option, metavar=metavar, type=kind, default=None, help=text)
            one.add_argument("--tag", action="append", default=None, metavar="TAG", help="a tag (repeated)")
            one.add_argument(
                "--set",
                action="append",
                default=[],
                metavar="KEY=JSON",
                help="any endpoint key with a JSON value (check={...} inline; KEY=null in a patch: the "
                "config's value again)",
            )
        _api_option(one)
        one.add_argument("--token", default=None, help=f"the API bearer token (default: ${TOKEN_ENV})")
        one.add_argument("--force", action="store_true", help="apply even when it breaks a safety rule")
        one.set_defaults(run=lambda a, action=action: _run(a, action))


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The endpoint keys the options give; ValueError naming a --set that is not KEY=JSON."""
    fields: dict[str, Any] = {}
    for _, _, key, _, _ in _KEYS:
        value = getattr(args, key)
        if value is not None:
            fields[key] = value
    if args.tag:
        fields["tags"] = args.tag
    for item in args.set:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: give KEY=JSON, e.g. --set 'tags=[\"canary\"]'")
        try:
            fields[key.strip()] = json.loads(text)
        except ValueError:
            fields[key.strip()] = text  # a bare word: a string (--set site=eu)
    return fields


def _run(args: argparse.Namespace, action: str) -> int:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    service = urllib.parse.quote(args.service, safe="")
    url = f"{args.api.rstrip('/')}/api/v1/services/{service}/endpoints"
    body: dict[str, Any] | None = None
    try:
        if action == "add":
            body = {"address": args.address, **_fields(args)}
        elif action == "patch":
            body = _fields(args)
            if not body:
                raise ValueError("give what to patch: --weight N, --site S, ... or --set KEY=JSON")
    except ValueError as exc:
        print(f"gslbd endpoints {action}: {exc}", file=sys.stderr)
        return 2
    if action != "add":
        url += "/" + urllib.parse.quote(args.address, safe="")
    if args.force:
        url += "?force=1"
    method = {"add": "POST", "remove": "DELETE", "patch": "PATCH"}[action]
    try:
        result = _request(method, url, body, token)
    except ApiError as exc:
        hint = ""
        if str(exc).startswith("401") and not token:
            hint = f" (give --token or set {TOKEN_ENV})"
        elif str(exc).startswith("409") and "safety" in str(exc):
            hint = f" (gslbd endpoints {action} --force applies it anyway)"
        print(f"gslbd endpoints {action}: {exc}{hint}", file=sys.stderr)
        return 1
    endpoint = result.get("endpoint") or {}
    detail = ""
    if endpoint:
        answered = "yes" if endpoint.get("effective_up") else "no"
        detail = (
            f" (source {endpoint.get('source')}, weight {endpoint.get('weight')}, now answered: {answered})"
        )
    print(f"{result['service']} {result['address']}: {_VERBS[action]}{detail}")
    for warning in result.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    return 0
