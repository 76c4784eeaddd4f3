"""The experience library: the optimised parameter L = [rule_1..rule_m] with |L| <= C.

Operations are ADD(rule), EDIT(i, rule), DELETE(i). `apply` returns a new library (candidates
are built and verified before they replace the current one). An ADD into a full library is
projected back onto the budget by evicting the rule of least utility, where a rule's utility
is an exponential moving average of the accuracy drop when it is ablated (our inferred design):
    u <- beta * u + (1 - beta) * (acc(L) - acc(L without rule)).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Op:
    kind: str            # "ADD" | "EDIT" | "DELETE"
    index: int | None = None
    rule: str | None = None

    def __post_init__(self):
        if self.kind not in ("ADD", "EDIT", "DELETE"):
            raise ValueError(f"unknown op {self.kind!r}")
        if self.kind in ("EDIT", "DELETE") and self.index is None:
            raise ValueError(f"{self.kind} needs an index")
        if self.kind in ("ADD", "EDIT") and not self.rule:
            raise ValueError(f"{self.kind} needs a rule text")


@dataclass
class Library:
    capacity: int | None                      # None = no budget
    rules: list[str] = field(default_factory=list)
    utility: list[float] = field(default_factory=list)

    def __post_init__(self):
        if not self.utility:
            self.utility = [0.0] * len(self.rules)
        if len(self.utility) != len(self.rules):
            raise ValueError("one utility per rule")
        if self.capacity is not None and len(self.rules) > self.capacity:
            raise ValueError(f"{len(self.rules)} rules exceed the capacity {self.capacity}")

    def __len__(self) -> int:
        return len(self.rules)

    def copy(self) -> "Library":
        return Library(self.capacity, list(self.rules), list(self.utility))

    def valid(self, op: Op) -> bool:
        return op.kind == "ADD" or (op.index is not None and 0 <= op.index < len(self.rules))

    def apply(self, op: Op) -> tuple["Library", str | None]:
        """(new library, evicted rule or None). An invalid index raises IndexError; an ADD of a
        rule already present is a no-op."""
        if not self.valid(op):
            raise IndexError(f"{op.kind} index {op.index} outside 0..{len(self.rules) - 1}")
        new, evicted = self.copy(), None
        if op.kind == "DELETE":
            del new.rules[op.index], new.utility[op.index]
        elif op.kind == "EDIT":
            new.rules[op.index] = op.rule          # an edited rule keeps its utility history
        elif op.rule not in new.rules:
            if new.capacity is not None and len(new.rules) >= new.capacity:
                j = new.evict_index()
                evicted = new.rules[j]
                del new.rules[j], new.utility[j]
            new.rules.append(op.rule)
            new.utility.append(0.0)
        return new, evicted

    def evict_index(self) -> int:
        """argmin utility; ties go to the oldest rule (lowest index)."""
        return min(range(len(self.rules)), key=lambda i: (self.utility[i], i))

    def update_utility(self, drops: list[float], beta: float) -> None:
        """EMA update with the measured ablation drops acc(L) - acc(L \\ rule_i), one per rule."""
        if len(drops) != len(self.rules):
            raise ValueError("one drop per rule")
        self.utility = [beta * u + (1 - beta) * d for u, d in zip(self.utility, drops)]

    def to_json(self) -> dict:
        return {"capacity": self.capacity, "rules": self.rules, "utility": self.utility}
