"""Options records of the settling family (Martín et al., Crauser et al.; Ortega-Arranz et al. sec. IV), shared by
both twins: the rule numbers below are also the GPU kernel's (``settle.cu``; a test compares them)."""
from __future__ import annotations

from ..common import Spec

#: Martín et al.: settle the unsettled nodes at the minimum tentative distance (sec. IV-D, eq. 3).
RULE_MARTIN = 0
#: Crauser et al., general: bound = min over unsettled u of dist(u) + min out-arc weight of u (IV-A/B, eq. 1).
RULE_GENERAL = 1
#: Crauser et al., economic: bound = min unsettled dist + the minimum arc weight (IV-C, eq. 2).
RULE_ECONOMIC = 2
RULES = {"martin": RULE_MARTIN, "crauser": RULE_GENERAL, "crauser-economic": RULE_ECONOMIC}

_VARIANTS = (None, "successor", "predecessor")
MARTIN = Spec("martin", variants=_VARIANTS, params=("rule",),
              doc="Martin et al.: frontier = unsettled nodes at the minimum distance, Ortega-Arranz et al. sec. IV-D/E")
CRAUSER = Spec("crauser", variants=_VARIANTS, params=("rule",),
               doc="Crauser et al. general variant, Ortega-Arranz et al. sec. IV-A/B")
CRAUSER_ECONOMIC = Spec("crauser-economic", variants=_VARIANTS, params=("rule",),
                        doc="Crauser et al. economic variant, Ortega-Arranz et al. sec. IV-C")


def is_pull(name, variant):
    """True for the predecessor (pull) variant; None means "successor".

    Raises
    ------
    ValueError
        Another variant.
    """
    if variant is None:
        variant = "successor"
    if variant not in ("successor", "predecessor"):
        raise ValueError(f"algorithm {name!r} takes variant 'successor' or 'predecessor', got {variant!r}")
    return variant == "predecessor"
