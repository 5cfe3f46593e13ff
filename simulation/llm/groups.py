"""A run's backends by model group: the ``llm:`` block's own, and one per group someone names.

A scenario's ``llm.groups`` names backend settings (``simulation.llm.settings``); a person or a
population that says ``llm: NAME`` asks that group's model (docs/llm.md, "A model per person").
This module builds what a run asks: each group's backend from its settings through the one
factory (``factory.build_backend``, so each sits behind the replay cache under its own model id
and tests swap in doubles in one place), or the objects a caller passes in. Only groups someone
names are built: an unused group loads no model. ``RunBackends.routes`` turns them into the
client's routes (``simulation.llm.client.Route``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from simulation.errors import InputError, Problem
from simulation.llm import factory, registry
from simulation.llm.backend import Backend
from simulation.llm.client import Route
from simulation.llm.settings import LLMSettings

__all__ = ["RunBackends", "build_run_backends"]


@dataclass
class RunBackends:
    """``default`` answers the people who name no model group; ``groups[NAME]`` those of group NAME."""

    default: Backend
    groups: dict[str, Backend] = field(default_factory=dict)
    owned: list[Backend] = field(default_factory=list)
    """The backends built here, which ``close`` closes; those passed in belong to their caller."""

    def routes(self, settings: LLMSettings) -> dict[str, Route]:
        """Each group's route: its backend, asked at the group's temperature and token cap."""
        out = {}
        for name, backend in self.groups.items():
            group = settings.group(name)
            out[name] = Route(backend, group.temperature, group.max_tokens, group.call_timeout_s, name)
        return out

    def models(self) -> dict[str, tuple[str, str]]:
        """Group -> (backend name, model id) of the backend that answers it (what run.db records)."""
        return {name: (b.name, b.model_id) for name, b in self.groups.items()}

    def close(self) -> None:
        """Close every backend built here, each even if another fails to close (the first error is raised)."""
        failed: BaseException | None = None
        for backend in self.owned:
            try:
                backend.close()
            except BaseException as exc:  # the others must still be closed: their models hold memory
                failed = failed or exc
        self.owned.clear()
        if failed is not None:
            raise failed


def build_run_backends(settings: LLMSettings, base_dir: Path, used: Iterable[str], *,
                       default: Backend | None = None, groups: Mapping[str, Backend] | None = None,
                       recorded: Mapping[str | None, tuple[str, str]] | None = None) -> RunBackends:
    """The backends a run with ``settings`` asks: ``default`` (else built from ``settings``) and, for
    each model group in ``used`` (the groups its people name), ``groups[NAME]`` (else built from the
    group's settings). ``recorded``: (backend, model id) per group (None: the default) that the run
    being resumed or verified recorded, for a backend whose model id only starting it can tell
    (``factory.build_backend``'s ``recorded_model``, and ``BackendEntry.resumed``: the bundled model's
    file a run began on is kept); used only where the backend is the same.

    A group passed in that the scenario does not have is bad input; when a backend fails to build,
    the ones built before it are closed again and the error goes on."""
    given = dict(groups or {})
    unknown = sorted(set(given) - set(settings.groups))
    if unknown:
        raise InputError(Problem("groups", f"no model group {', '.join(map(repr, unknown))} in the scenario's "
                                 f"llm.groups ({', '.join(sorted(settings.groups)) or 'none'})"))
    recorded = recorded or {}

    def build(name: str | None) -> Backend:
        made_by = recorded.get(name)
        chosen = registry.as_recorded(settings.group(name), made_by)
        model = made_by[1] if made_by is not None and made_by[0] == chosen.backend else None
        return factory.build_backend(chosen, base_dir, recorded_model=model)

    out = RunBackends(default if default is not None else build(None))
    if default is None:
        out.owned.append(out.default)
    try:
        for name in sorted(set(used)):
            if name in given:
                out.groups[name] = given[name]
            else:
                out.groups[name] = build(name)
                out.owned.append(out.groups[name])
    except BaseException:
        out.close()
        raise
    return out
