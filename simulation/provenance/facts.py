"""A scenario's fact as the plain data detection and scoring work on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.provenance.conveys import FactText
from simulation.provenance.details import Detail

if TYPE_CHECKING:
    from simulation.scenario import Fact


def fact_text(fact: Fact) -> FactText:
    return FactText(fact.id, fact.text, tuple(Detail(d.name, d.kind, d.value, tuple(d.aliases)) for d in fact.details))
