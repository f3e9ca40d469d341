"""The result of one stream: a typed model (``Result`` and its parts, as TypedDicts: the JSON-safe dict
itself, typed, at no cost per stream) spelled in one place (``_result``), and that dict's JSON Schema.

Final checks happen here, at the end and never earlier: truncation, arguments that do not parse, each
hazard strategy's calls compared with the identity result, and the calls checked against what the
request declared (tool names, their JSON schemas, parallel calls, a forced tool). A front door that has
more to say of a finished result (the client's echoes) says it through ``add_warnings``, which goes through
a warning log and its per-code cap like every other warning.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

import orjson

from . import formats
from .assembly import Assembly, ChoiceState, early_end, fragment_text
from .ops import real_id
from .request import RequestFacts
from .usage import FIGURES, normalised
from .warnings import WarningLog

_TEXT_CAP = 4096  # how much of an orphan's or a strategy's text a warning quotes


class CallResult(TypedDict):
    """One tool call as identity routing rebuilt it, with its timing facts."""

    id: str | None
    index: int | None
    name: str | None
    arguments: str
    deltas: int
    first_event: int
    last_event: int
    first_at: float | None
    last_at: float | None
    interleaved: bool
    arguments_truncated: bool
    custom: NotRequired[bool]  # only on a custom tool's call: its arguments are raw text, not JSON
    namespace: NotRequired[str]  # only where the call names the namespace of its tool (Responses)
    builtin: NotRequired[str]  # only on a built-in tool's call the client runs (Responses: its type)


class ChoiceResult(TypedDict):
    index: int
    text: str | None
    reasoning: str | None
    refusal: str | None
    finish_reason: str | None
    tool_calls: list[CallResult]


class Verdict(TypedDict):
    """Would a client following one hazard strategy rebuild the stream: "ok", "breaks" or "n/a", and why."""

    verdict: str
    reason: str


class Stats(TypedDict):
    events: int
    bytes: int
    warnings_suppressed: int
    calls_dropped: int
    deltas_dropped: int


class Result(TypedDict, total=False):
    """Everything one response amounts to: the JSON shape RESULT_SCHEMA describes, typed. ``_result`` is
    the only place it is spelled; ``rewrite`` and ``source`` are added by the front doors that have them,
    ``websocket`` by ``accumulator.websocket`` for a response that came over a WebSocket."""

    format: str
    streamed: bool
    complete: bool
    model: str | None
    response_id: str | None
    choices: list[ChoiceResult]
    usage: dict
    error: Any
    warnings: list[dict]
    compatibility: dict[str, Verdict]
    timing: dict | None
    stats: Stats
    rewrite: dict
    source: dict
    websocket: dict
    evidence: dict
    cost: dict | None
    cost_note: str
    session: dict


def _result(
    format: str,
    streamed: bool,
    complete: bool,
    warnings: WarningLog,
    *,
    model: str | None = None,
    response_id: str | None = None,
    choices: list[ChoiceResult] | None = None,
    usage: dict,
    error: Any = None,
    compatibility: dict[str, Verdict] | None = None,
    timing: dict | None = None,
    events: int = 0,
    nbytes: int = 0,
    calls_dropped: int = 0,
    deltas_dropped: int = 0,
) -> Result:
    return {
        "format": format,
        "streamed": streamed,
        "complete": complete,
        "model": model,
        "response_id": response_id,
        "choices": choices if choices is not None else [],
        "usage": usage,
        "error": error,
        "warnings": warnings.to_list(),
        "compatibility": compatibility if compatibility is not None else {},
        "timing": timing,
        "stats": {
            "events": events,
            "bytes": nbytes,
            "warnings_suppressed": warnings.suppressed,
            "calls_dropped": calls_dropped,
            "deltas_dropped": deltas_dropped,
        },
    }


def add_warnings(result: Result | dict, warnings: list[dict]) -> None:
    """Add warnings found after the result was built (a request's echoes) to it, through a warning log:
    the per-code cap holds, and what it keeps out is counted in ``stats.warnings_suppressed``."""
    if not warnings:
        return
    log = WarningLog.of(result["warnings"], result["stats"]["warnings_suppressed"])
    log.extend(warnings)
    result["warnings"] = log.to_list()
    result["stats"]["warnings_suppressed"] = log.suppressed


def build_result(
    *,
    format: str,
    streamed: bool,
    assembly: Assembly,
    warnings: WarningLog,
    request: RequestFacts | None,
    events: int,
    nbytes: int,
    empty_arguments: str = "",
    not_applicable: tuple[str, ...] = (),
    timing: dict | None = None,
    first_event_at: float | None = None,
) -> Result:
    """``not_applicable``: strategies asked for that this format gives nothing to route (whole calls)."""
    choices = [assembly.choices[i] for i in sorted(assembly.choices)]
    for state in choices:
        _orphan_warning(state, warnings)
    out_choices = [_choice_result(state, warnings, empty_arguments, first_event_at) for state in choices]
    if request is not None:
        _request_checks(out_choices, request, warnings)
    replayed = assembly.awake_strategies()
    for strategy in assembly.strategies:
        if strategy.derived and strategy.derive(assembly.choices):
            replayed.add(strategy.name)
    agreeing = _agreeing(out_choices) if len(replayed) < len(assembly.strategies) else None
    compatibility: dict[str, Verdict] = {
        strategy.name: agreeing
        if agreeing is not None and strategy.name not in replayed
        else _verdict(strategy, out_choices, warnings, empty_arguments)
        for strategy in assembly.strategies
    }
    for name in not_applicable:
        compatibility[name] = {
            "verdict": "n/a",
            "reason": "every call arrives whole in this format: nothing to route",
        }
    ended_for_tools = formats.tool_finish(format)
    if ended_for_tools and not assembly.calls_dropped:  # calls over the cap are not read, and said so
        for out in out_choices:
            reason = out["finish_reason"]
            if reason in ended_for_tools and not out["tool_calls"]:
                warnings.add(
                    "tool-calls-missing",
                    f"choice {out['index']} ended for its tool calls (finish reason {reason!r}) but carried "
                    "no call that could be read",
                    choice=out["index"],
                    finish_reason=reason,
                )
    truncated = not assembly.ended and (not choices or any(s.finish_reason is None for s in choices))
    if truncated:
        unfinished = [s.index for s in choices if s.finish_reason is None]
        warnings.add(
            "truncated-stream",
            "the stream ended without its end marker"
            + (f"; unfinished choices: {unfinished}" if choices else " and before any choice arrived"),
            unfinished_choices=unfinished,
        )
    return _result(
        format,
        streamed,
        not truncated and not assembly.errors,
        warnings,
        model=assembly.model,
        response_id=assembly.response_id,
        choices=out_choices,
        usage=normalised(
            formats.usage_parts(format),
            assembly.usage,
            truncated=truncated,
            why_none=_why_no_usage(truncated, assembly, request),
        ),
        error=assembly.errors[-1] if assembly.errors else None,
        compatibility=compatibility,
        timing=timing,
        events=events,
        nbytes=nbytes,
        calls_dropped=assembly.calls_dropped,
        deltas_dropped=assembly.deltas_dropped,
    )


def _why_no_usage(truncated: bool, assembly: Assembly, request: RequestFacts | None) -> str:
    if truncated:
        return "the stream ended before its usage arrived"
    if assembly.errors:
        return "the provider sent an error and no usage"
    if request is not None and request.usage_asked is False:
        return "the request did not ask for usage (stream_options.include_usage)"
    return "the provider sent no usage"


def failure_result(format: str, message: str, *, streamed: bool = True, nbytes: int = 0) -> Result:
    """The result of a stream whose analysis failed inside toolcall-lens: says so, claims nothing else."""
    warnings = WarningLog()
    warnings.add("internal-error", f"analysis stopped: {message}", error=message)
    usage = normalised(None, None, why_none="the analysis stopped before any usage was read")
    return _result(format, streamed, False, warnings, usage=usage, nbytes=nbytes)


def unread_result(format: str, code: str, message: str, *, streamed: bool, **details) -> Result:
    """The result of an exchange the addon could not read (``body-not-kept``: no body was kept;
    ``stream-not-seen``: its stream went past another addon's callable): says why, claims nothing else."""
    warnings = WarningLog()
    warnings.add(code, message, **details)
    usage = normalised(None, None, why_none="the body was not read")
    return _result(format, streamed, False, warnings, usage=usage)


def _relative(moment: float | None, origin: float | None) -> float | None:
    return None if moment is None or origin is None else round(moment - origin, 6)


def _choice_result(
    state: ChoiceState, warnings: WarningLog, empty: str, first_event_at: float | None
) -> ChoiceResult:
    calls: list[CallResult] = []
    for call in state.calls:
        custom = call.custom
        arguments = call.arguments or ("" if custom else empty)
        # Cut arguments are not JSON (arguments-cap said why); a custom tool's are raw text.
        if arguments and not call.truncated and not custom:
            try:
                orjson.loads(arguments)
            except orjson.JSONDecodeError as exc:
                call.cut = early_end(call, arguments)  # what a parse-early client kept of them, if less
                warnings.add(
                    "invalid-arguments",
                    f"call {call.id or '#' + str(call.ordinal)} ({call.name}): arguments are not valid JSON: {exc}",
                    choice=state.index,
                    id=call.id,
                    name=call.name,
                    arguments=_cap(arguments),
                )
        out: CallResult = {
            "id": call.id,
            "index": call.index,
            "name": call.name,
            "arguments": arguments,
            "deltas": call.deltas,
            "first_event": call.first_event,
            "last_event": call.last_event,
            "first_at": _relative(call.first_at, first_event_at),
            "last_at": _relative(call.last_at, first_event_at),
            "interleaved": call.interleaved,
            "arguments_truncated": call.truncated,
        }
        if custom:
            out["custom"] = True
        if call.namespace is not None:
            out["namespace"] = call.namespace
        if call.builtin is not None:
            out["builtin"] = call.builtin
        calls.append(out)
    return {
        "index": state.index,
        "text": "".join(state.text) if state.text else None,
        "reasoning": "".join(state.reasoning) if state.reasoning else None,
        "refusal": "".join(state.refusal) if state.refusal else None,
        "finish_reason": state.finish_reason,
        "tool_calls": calls,
    }


def _request_checks(out_choices: list[ChoiceResult], request: RequestFacts, warnings: WarningLog) -> None:
    validators: dict[str, Any] = {}  # tool name -> its schema's validator, False for a schema unjudgeable
    for out in out_choices:
        calls = out["tool_calls"]
        for position, call in enumerate(calls):
            label = f"call {call['id'] or '#' + str(position)}"
            if request.tools is not None:
                if call["name"] not in request.tools:
                    if request.tools_open and call["name"]:
                        continue  # declared out of sight, perhaps: loaded by a stored turn's tool search
                    warnings.add(
                        "undeclared-tool",
                        f"{label} "
                        + (
                            f"names {call['name']!r}, which the request did not declare"
                            if call["name"]
                            else "has no name"
                        ),
                        choice=out["index"],
                        id=call["id"],
                        name=call["name"],
                        declared=sorted(request.tools),
                    )
                elif (schema := request.tools[call["name"]]) is not None and not call.get("custom"):
                    _check_schema(call, label, out["index"], schema, validators, warnings)
        if request.parallel is False and len(calls) > 1:
            warnings.add(
                "parallel-disabled",
                f"{len(calls)} tool calls in choice {out['index']} although the request turned parallel calls off",
                choice=out["index"],
                names=[c["name"] for c in calls],
            )
        if (
            request.forced
            and out["finish_reason"] is not None
            and all(c["name"] != request.forced for c in calls)
        ):
            warnings.add(
                "tool-choice-ignored",
                f"the request forced {request.forced!r} but choice {out['index']} called "
                + (", ".join(repr(c["name"]) for c in calls) or "no tool"),
                choice=out["index"],
                forced=request.forced,
            )


def _check_schema(
    call: CallResult, label: str, choice: int, schema: dict, validators: dict, warnings: WarningLog
) -> None:
    try:
        arguments = orjson.loads(call["arguments"] or "{}")
    except orjson.JSONDecodeError:
        return  # already an invalid-arguments warning
    validator: Any = validators.get(call["name"])
    if validator is None:
        from jsonschema import exceptions  # only when schemas exist
        from jsonschema import validators as jsonschema_validators

        cls = jsonschema_validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except exceptions.SchemaError:
            validator = validators[call["name"]] = False  # a schema we cannot judge by: no verdict
        else:
            validator = validators[call["name"]] = cls(schema)
    if validator is False:
        return
    error = next(iter(validator.iter_errors(arguments)), None)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        warnings.add(
            "schema-mismatch",
            f"{label} ({call['name']}): arguments do not match the declared schema at {where}: {error.message}",
            choice=choice,
            id=call["id"],
            name=call["name"],
            path=where,
            error=_cap(error.message, 500),
        )


def _orphan_warning(state: ChoiceState, warnings: WarningLog) -> None:
    if not state.orphans:
        return
    texts = [fragment_text(op.arguments) for op in state.orphans if op.arguments is not None]
    events = [op.event for op in state.orphans]
    indices = sorted({op.index for op in state.orphans if op.index is not None})
    warnings.add(
        "orphan-delta",
        f"{len(events)} fragment(s) of choice {state.index} named no known call"
        + (
            f" (index {', '.join(map(str, indices))})"
            if indices
            else " (no id, no index, several calls open)"
        ),
        choice=state.index,
        count=len(events),
        events=events[:50],
        indices=indices,
        arguments=_cap("".join(texts)),
    )


def _agreeing(out_choices: list[ChoiceResult]) -> Verdict:
    total = sum(len(out["tool_calls"]) for out in out_choices)
    return {
        "verdict": "ok",
        "reason": f"rebuilds the same {total} call(s)" if total else "no tool calls to rebuild",
    }


def _verdict(strategy, out_choices: list[ChoiceResult], warnings: WarningLog, empty: str) -> Verdict:
    """Compare a strategy's calls with the identity result, choice by choice: a warning where they
    differ, and the one-line verdict."""
    broken = []
    total = 0
    for out in out_choices:
        identity = out["tool_calls"]
        total += len(identity)
        # Ids as identity reads them: a placeholder names no call, an id of another type is its text.
        simulated = [
            {"id": real_id(c["id"]), "name": c["name"], "arguments": c["arguments"] or empty}
            for c in strategy.calls(out["index"])
        ]
        if [(c["id"], c["name"], c["arguments"]) for c in simulated] == [
            (c["id"], c["name"], c["arguments"]) for c in identity
        ]:
            continue
        event = strategy.first_divergence
        # On one line: arguments can hold line breaks (a custom tool's patch, pretty-printed JSON).
        summary = ", ".join(f"{c['name']}({_inline(c['arguments'], 60)})" for c in simulated) or "no calls"
        what = (
            "different calls"
            if len(simulated) == len(identity)
            else f"{len(simulated)} call(s) instead of {len(identity)}"
        )
        warnings.add(
            strategy.code,
            f"{strategy.name} routing would have built {what} (first diverging at event {event}): {summary}",
            strategy=strategy.name,
            choice=out["index"],
            first_divergence_event=event,
            would_build=[
                {"id": c["id"], "name": c["name"], "arguments": _cap(c["arguments"])} for c in simulated
            ],
        )
        broken.append(f"{what} at event {event}: {_cap(summary, 160)}")
    if broken:
        return {"verdict": "breaks", "reason": "builds " + "; ".join(broken)}
    return {
        "verdict": "ok",
        "reason": f"rebuilds the same {total} call(s)" if total else "no tool calls to rebuild",
    }


def _cap(text: str, limit: int = _TEXT_CAP) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _inline(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, its line breaks written as ``\\n``, ``\\r``."""
    return _cap(text, limit).replace("\r", "\\r").replace("\n", "\\n")


_WARNING = {
    "type": "object",
    "required": ["code", "severity", "message"],
    "properties": {
        "code": {"type": "string"},
        "severity": {"enum": ["warning", "info"]},
        "message": {"type": "string"},
    },
}
_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_NUMBER = {"type": ["number", "null"]}

# The shape of every result (README documents it field by field; tests validate results against it).
RESULT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "toolcall-lens result",
    "type": "object",
    "required": [
        "format",
        "streamed",
        "complete",
        "model",
        "response_id",
        "choices",
        "usage",
        "error",
        "warnings",
        "compatibility",
        "timing",
        "stats",
    ],
    "additionalProperties": False,
    "properties": {
        "format": {"type": "string"},
        "streamed": {"type": "boolean"},
        "complete": {"type": "boolean"},
        "model": _NULLABLE_STR,
        "response_id": _NULLABLE_STR,
        "choices": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "text", "reasoning", "refusal", "finish_reason", "tool_calls"],
                "additionalProperties": False,
                "properties": {
                    "index": {"type": "integer"},
                    "text": _NULLABLE_STR,
                    "reasoning": _NULLABLE_STR,
                    "refusal": _NULLABLE_STR,
                    "finish_reason": _NULLABLE_STR,
                    "tool_calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [
                                "id",
                                "index",
                                "name",
                                "arguments",
                                "deltas",
                                "first_event",
                                "last_event",
                                "first_at",
                                "last_at",
                                "interleaved",
                                "arguments_truncated",
                            ],
                            "additionalProperties": False,
                            "properties": {
                                "id": _NULLABLE_STR,
                                "index": {"type": ["integer", "null"]},
                                "name": _NULLABLE_STR,
                                "arguments": {"type": "string"},
                                "deltas": {"type": "integer", "minimum": 0},
                                "first_event": {"type": "integer"},
                                "last_event": {"type": "integer"},
                                "first_at": _NULLABLE_NUMBER,
                                "last_at": _NULLABLE_NUMBER,
                                "interleaved": {"type": "boolean"},
                                "arguments_truncated": {
                                    "type": "boolean",
                                    "description": "arguments beyond the per-call cap were not kept",
                                },
                                "custom": {
                                    "const": True,
                                    "description": "only on a custom tool's call (OpenAI's free-form tools): "
                                    "its arguments are the raw text the model wrote, not JSON",
                                },
                                "namespace": {
                                    "type": "string",
                                    "description": "only where the call names the namespace that declared "
                                    "its tool (Responses: Codex declares each MCP server's tools in one)",
                                },
                                "builtin": {
                                    "enum": [
                                        "tool_search",
                                        "shell",
                                        "local_shell",
                                        "apply_patch",
                                        "computer",
                                    ],
                                    "description": "only on the call of one of OpenAI's built-in tools the "
                                    "client runs (Responses: tool_search with execution client, shell but a "
                                    "hosted one, local_shell, apply_patch, computer): its name is the tool's "
                                    "type, its arguments the item's object as JSON (a tool search's "
                                    "arguments, a shell's action, a patch's operation, a computer's action "
                                    "or actions)",
                                },
                            },
                        },
                    },
                },
            },
        },
        "usage": {
            "type": "object",
            "description": "token counts, normalised the same way for every format (input includes cached "
            "tokens; null where unknown), the provider's own usage object, and notes",
            "required": [*FIGURES, "provider", "notes"],
            "properties": {
                **{name: {"type": ["integer", "null"], "minimum": 0} for name in FIGURES},
                "provider": {"type": ["object", "null"]},
                "notes": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
        },
        "error": {},
        "warnings": {"type": "array", "items": _WARNING},
        "compatibility": {
            "type": "object",
            "description": "per hazard strategy: would a client following it rebuild this stream correctly",
            "additionalProperties": {
                "type": "object",
                "required": ["verdict", "reason"],
                "properties": {"verdict": {"enum": ["ok", "breaks", "n/a"]}, "reason": {"type": "string"}},
            },
        },
        "timing": {
            "type": ["object", "null"],
            "description": "seconds from the request being sent (or the first byte); null without a clock",
            "properties": {
                "clock": {"type": "boolean"},
                "time_to_first_byte": _NULLABLE_NUMBER,
                "time_to_first_event": _NULLABLE_NUMBER,
                "time_to_first_token": _NULLABLE_NUMBER,
                "first_token_event": {"type": ["integer", "null"]},
                "duration": _NULLABLE_NUMBER,
                "events_per_second": _NULLABLE_NUMBER,
                "longest_gap": _NULLABLE_NUMBER,
                "longest_gap_after_event": {"type": ["integer", "null"]},
            },
        },
        "rewrite": {
            "type": "object",
            "description": "the addon rewrote this stream (toolcall_lens_inject / _repair): what it did, and the "
            "upstream's own stream compared (the result above is what the client got)",
            "required": ["inject", "repair", "skipped"],
            "properties": {
                "inject": {"type": "array", "items": {"type": "string"}},
                "repair": {"type": "array", "items": {"type": "string"}},
                "skipped": {"type": "array"},
                "stopped": {
                    "type": ["object", "null"],
                    "description": "the rewriting stopped (a cap, a body it could not decode): the rest passed "
                    "as it came",
                    "required": ["reason", "after_events"],
                    "properties": {"reason": {"type": "string"}, "after_events": {"type": "integer"}},
                },
                "failure": {
                    "type": "string",
                    "description": "the rewriting failed: the rest passed as it came",
                },
                "upstream_failure": {
                    "type": "string",
                    "description": "only the analysis of the upstream's own stream failed; rewriting went on",
                },
                "upstream": {
                    "type": "object",
                    "properties": {
                        "calls_same": {"type": "boolean"},
                        "complete": {"type": "boolean"},
                        "warnings": {"type": "array", "items": {"type": "string"}},
                        "compatibility": {"type": "object"},
                    },
                },
            },
        },
        "cost": {
            "type": ["object", "null"],
            "description": "the addon and the CLI: what the response cost (USD), priced on its own from "
            "usage and the model's price; null when no price or count is known (cost_note says why)",
            "required": ["total", "currency", "input", "output", "cache_read", "cache_write", "price"],
            "additionalProperties": False,
            "properties": {
                **{
                    k: {"type": "number", "minimum": 0}
                    for k in ("total", "input", "output", "cache_read", "cache_write")
                },
                "currency": {"const": "USD"},
                "price": {
                    "type": "object",
                    "required": ["source", "provider", "model", "as_of", "per_million"],
                    "properties": {
                        "source": {"type": "string"},
                        "provider": {"type": ["string", "null"]},
                        "model": {"type": "string"},
                        "as_of": {"type": ["string", "null"]},
                        "per_million": {"type": "object"},
                    },
                },
            },
        },
        "cost_note": {"type": "string", "description": "why cost is null"},
        "session": {
            "type": "object",
            "description": "the addon and the CLI on a dump: the agent session the response belongs to, its "
            "turn, how the session was told, and the tool results its request sent back",
            "required": ["id", "turn", "by", "tool_results"],
            "additionalProperties": False,
            "properties": {
                "id": {"type": "string"},
                "turn": {"type": "integer", "minimum": 1},
                "by": {"type": "string"},
                "tool_results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["id", "size", "error"],
                        "properties": {
                            "id": {"type": ["string", "null"]},
                            "name": {"type": "string"},
                            "size": {"type": "integer", "minimum": 0},
                            "error": {"type": ["boolean", "null"]},
                        },
                    },
                },
            },
        },
        "evidence": {
            "type": "object",
            "description": "what checking the request's echoes against earlier responses did (the addon, and "
            "the CLI on a dump): calls checked, matched, unanswered, unknown, the earlier flows; or why nothing "
            "could be checked",
            "required": ["checked", "matched", "unanswered", "unknown", "earlier_flows", "reason"],
            "additionalProperties": False,
            "properties": {
                "checked": {"type": "integer", "minimum": 0},
                "matched": {"type": "integer", "minimum": 0},
                "unanswered": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "the calls left out: ids, or FLOW#POSITION for a call the stream gave no id",
                },
                "unknown": {"type": "array", "items": {"type": "string"}},
                "earlier_flows": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": ["string", "null"]},
            },
        },
        "relayed_from": {
            "type": "object",
            "description": "a response a gateway relayed, where this proxy (or dump) saw the gateway's own "
            "response from its provider too (accumulator.relay): that flow, and whether the calls are the same",
            "required": ["flow_id", "calls_same"],
            "additionalProperties": False,
            "properties": {"flow_id": {"type": "string"}, "calls_same": {"type": "boolean"}},
        },
        "websocket": {
            "type": "object",
            "description": "the response came over a WebSocket (accumulator.websocket): where it sits on the "
            "connection, and the client's evidence about its calls",
            "required": [
                "position",
                "lane",
                "prewarm",
                "status",
                "first_message",
                "last_message",
                "audio_bytes",
                "evidence",
            ],
            "additionalProperties": False,
            "properties": {
                "position": {"type": "integer", "minimum": 1, "description": "1-based, in order of start"},
                "lane": {"type": ["string", "null"], "description": "Responses WebSocket stream_id"},
                "prewarm": {"type": "boolean", "description": "a response.create with generate: false"},
                "status": {
                    "type": ["string", "null"],
                    "description": "how the provider ended it when not completed (cancelled, failed, ...)",
                },
                "first_message": {"type": "integer", "minimum": 0},
                "last_message": {"type": "integer", "minimum": 0},
                "audio_bytes": {"type": "integer", "minimum": 0, "description": "audio counted, not kept"},
                "evidence": {
                    "type": ["object", "null"],
                    "description": "what the client's later messages said of its calls; null: nothing "
                    "(no call, or no answer before the connection ended)",
                    "properties": {
                        "answered": {"type": "array", "items": {"type": "string"}},
                        "unanswered": {"type": "array", "items": {"type": "string"}},
                        "cancelled": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
        "source": {
            "type": "object",
            "description": "where the CLI read it: file (rewritten_from for --output); for a flow of a mitmproxy "
            "dump or a HAR file flow_id (and a HAR's entry), url, time, replay (a flow replayed in mitmproxy: "
            "request; answered by --server-replay: response), and timing (whose clock the timing is); "
            "from the addon, for a stream it read whole (a flow loaded from a file, a response an addon "
            "answered): read and timing",
        },
        "stats": {
            "type": "object",
            "required": ["events", "bytes", "warnings_suppressed", "calls_dropped", "deltas_dropped"],
            "properties": {
                "events": {"type": "integer", "minimum": 0},
                "bytes": {"type": "integer", "minimum": 0},
                "warnings_suppressed": {"type": "integer", "minimum": 0},
                "calls_dropped": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "calls beyond the calls cap",
                },
                "deltas_dropped": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "their deltas, the opening one included",
                },
            },
        },
    },
}


CONNECTION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "toolcall-lens WebSocket connection",
    "description": "what a front door stores for a WebSocket flow (accumulator.websocket.connection_result)",
    "type": "object",
    "required": ["transport", "connection", "responses"],
    "additionalProperties": False,
    "properties": {
        "transport": {"const": "websocket"},
        "connection": {
            "type": "object",
            "required": ["format", "path", "responses", "messages", "bytes", "results_dropped", "warnings"],
            "properties": {
                "format": {"type": ["string", "null"]},
                "path": {"type": "string"},
                "responses": {"type": "integer", "minimum": 0},
                "messages": {"type": "object"},
                "bytes": {"type": "object"},
                "results_dropped": {"type": "integer", "minimum": 0},
                "warnings": {"type": "array"},
                "warnings_over_cap": {"type": "integer", "minimum": 0},
                "trimmed": {"type": "integer", "minimum": 0},
                "closed": {"type": ["object", "null"]},
            },
        },
        "responses": {"type": "array", "items": {k: v for k, v in RESULT_SCHEMA.items() if k != "$schema"}},
        "rewrite": {
            "type": "object",
            "description": "the addon rewrote the server's messages (toolcall_lens_inject / _repair): what it "
            "did, and per response the upstream's own messages compared (the responses above are what the "
            "client got)",
            "required": ["inject", "repair", "skipped"],
            "properties": {
                "inject": {"type": "array", "items": {"type": "string"}},
                "repair": {"type": "array", "items": {"type": "string"}},
                "skipped": {"type": "array"},
                "upstream": {"type": "array", "items": {"type": "object"}},
            },
        },
    },
}
