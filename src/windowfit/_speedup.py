"""Where the optional C speedup comes from, and how to turn it off.

``windowfit._weigh`` (built from ``_weigh.c`` where a C compiler is at hand; see
``setup.py``) computes the profile estimate of :mod:`windowfit.profiles` in one pass.
Without it, or with ``WINDOWFIT_NO_SPEEDUPS=1`` in the environment when windowfit is
imported, the profiles count in Python: the same numbers, more slowly. This module only
finds the extension, so that ``import windowfit`` never fails for want of it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._weigh import Weigher as _WeigherType

#: The environment variable that turns the C speedup off (any value but "" and "0").
DISABLE_VARIABLE = "WINDOWFIT_NO_SPEEDUPS"


def _find() -> type[_WeigherType] | None:
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from ._weigh import Weigher as found
    except ImportError:  # not built: counting stays in Python
        return None
    return found


#: The C estimate's class, or None where it is not built or turned off.
Weigher: type[_WeigherType] | None = _find()
