"""RunSettings: everything a run is set up from, resolved once and passed down.

A run's settings come from three places: the scenario file, the command line's overrides (or the
Python API's arguments) and, for a run resumed, what the run was started with. Resolving them in
several places let them drift (the LLM settings were resolved three times per run and the model
path twice). As vLLM's ``EngineArgs`` is resolved once into the engine's config, a run's settings
are resolved once here, into one frozen object that ``Simulation`` holds and hands to the
runner and the model; nothing below re-reads the scenario's ``llm:`` block or the command line.

- ``loaded``: the scenario as run (its ``llm`` block replaced by ``llm``: what resume rebuilds from);
- ``llm``: the backend settings, the command line's overrides applied (a model path given there is
  taken from the working directory, one in the scenario from the scenario's folder, ``base_dir``);
- ``seed``, ``ticks`` (planned), ``out`` (where the run directory goes);
- ``cognition()``: the numbers cognition reads, gathered from the scenario's clock, memory,
  cognition and llm sections (the ``Mind``'s ``MindSettings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from simulation.cognition import MindSettings
from simulation.llm.factory import BackendChoice
from simulation.scenario import LLMSettings, LoadedScenario

__all__ = ["RunSettings"]


@dataclass(frozen=True)
class RunSettings:
    loaded: LoadedScenario
    """The scenario as run: its ``llm`` block is ``llm``."""
    llm: LLMSettings
    seed: int
    ticks: int
    """Ticks the run is planned for."""
    out: Path = Path("runs")

    @classmethod
    def resolve(cls, loaded: LoadedScenario, *, llm: BackendChoice | None = None, seed: int | None = None,
                ticks: int | None = None, out: str | Path = "runs") -> RunSettings:
        """A new run's settings: the scenario's, with these overrides (None: the scenario's own)."""
        resolved = _with_overrides(loaded.scenario.llm, llm or BackendChoice())
        sc = loaded.scenario
        return cls(_as_run(loaded, resolved), resolved, sc.seed if seed is None else seed,
                   sc.clock.total_ticks if ticks is None else ticks, Path(out))

    @classmethod
    def resumed(cls, as_run: LoadedScenario, *, seed: int, ticks: int, llm: BackendChoice | None = None) -> RunSettings:
        """A resumed run's settings: the scenario as it was run (``resume_state``), the LLM overrides
        of this resume applied on top of the settings it was started with."""
        resolved = _with_overrides(as_run.scenario.llm, llm or BackendChoice())
        return cls(_as_run(as_run, resolved), resolved, seed, ticks)

    @property
    def base_dir(self) -> Path:
        """Where the scenario's relative paths are taken from (its folder)."""
        return Path(self.loaded.path).parent

    def cognition(self) -> MindSettings:
        """The numbers cognition reads (``Mind.settings``)."""
        sc = self.loaded.scenario
        cog = sc.cognition
        return MindSettings(
            tick_minutes=sc.clock.tick_minutes, attention_bandwidth=cog.attention_bandwidth,
            conversation_cooldown=timedelta(minutes=cog.conversation_cooldown_minutes),
            max_conversation_turns=cog.max_conversation_turns, min_conversation_turns=cog.min_conversation_turns,
            reflection_threshold=sc.memory.reflection_threshold, context_tokens=self.llm.context_tokens,
            reactions_per_hour=cog.reactions_per_hour, choices=cog.choices, temperature=self.llm.temperature,
            calibrate=cog.calibrate, talk_prior=cog.talk_prior, seek=cog.seek, planning=cog.planning,
            recognition=cog.recognition, recognition_margin=cog.recognition_margin,
            recognition_unit=cog.recognition_unit, probe_temperature=cog.probe_temperature,
            live_context=cog.live_context, story=sc.story, moods=cog.moods,
        )


def _with_overrides(settings: LLMSettings, choice: BackendChoice) -> LLMSettings:
    """``settings`` with the command line's overrides (``BackendChoice.apply``: a model path given
    there is taken from the working directory; one in the scenario stays relative to its folder)."""
    return choice.apply(settings)


def _as_run(loaded: LoadedScenario, llm: LLMSettings) -> LoadedScenario:
    return loaded.model_copy(update={"scenario": loaded.scenario.model_copy(update={"llm": llm})})
