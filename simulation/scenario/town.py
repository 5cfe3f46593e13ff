"""A scenario's ``town:`` section: places, the objects in them, and the walking paths between them."""

from __future__ import annotations

from pydantic import Field, model_validator

from simulation.formats.fields import Identifier, LongText, ShortText, StrictModel

__all__ = ["PathSpec", "Place", "Town"]


class Place(StrictModel):
    id: Identifier
    name: ShortText
    kind: ShortText = Field(description="home, cafe, park, shop, college, bar, ...")
    description: LongText = ""
    objects: list[ShortText] = Field(default_factory=list, max_length=50)
    states: dict[ShortText, ShortText] = Field(
        default_factory=dict, description="object -> its state at the start ('locked', 'out of tune'); a 'prop' "
        "event changes it during the run (simulation/world/props.py)")

    @model_validator(mode="after")
    def _states_of_objects(self) -> Place:
        unknown = sorted(set(self.states) - set(self.objects))
        if unknown:
            raise ValueError(f"states: {', '.join(map(repr, unknown))} is not one of this place's objects")
        return self
    position: tuple[float, float] | None = Field(
        None, description="x, y for the map in the viewer (default: a graph layout)"
    )


class PathSpec(StrictModel):
    between: tuple[Identifier, Identifier]
    minutes: int = Field(ge=1, le=600, description="walking time in game minutes")


class Town(StrictModel):
    places: list[Place] = Field(min_length=1, max_length=500)
    paths: list[PathSpec] = Field(default_factory=list, max_length=5000)
