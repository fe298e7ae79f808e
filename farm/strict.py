"""farm's one strict pydantic base: a model that refuses a key it does not declare.

Every model of a study file, a record, a plan or a report derives from `Strict`, so that a typo in
a study (`repeat: 3`) or a stored object from another farm fails with the key's name instead of
being dropped in silence (pydantic's default). Below every package that defines models (pydantic
alone), so any of them can import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
