"""How often the UI's password may be tried: after a few wrong ones, sign-in pauses, longer each time, up to a cap.

The count is the server process's, shared by every browser session (a new
session is no way around it). A pause always ends, so the owner is never
locked out for good: at worst they wait ``longest_pause_s`` after the last
wrong try. No Streamlit here; ``app.ui.signin`` shows the messages.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

TRIES_BEFORE_PAUSE = 5  # wrong passwords in a row that start the first pause
FIRST_PAUSE_S = 30.0
LONGEST_PAUSE_S = 900.0


class SignInThrottle:
    """Wrong passwords of every session, counted together, and the pause they impose.

    The ``tries_before_pause``-th wrong password in a row pauses sign-in for
    ``first_pause_s``; each wrong one after a pause doubles it, up to
    ``longest_pause_s``. A try during a pause is to be refused unchecked (the
    page does so), so it does not lengthen the pause. A right password clears
    the count. Safe to call from the threads of several sessions.

    Args:
        tries_before_pause: Wrong passwords in a row that start the first pause (default 5).
        first_pause_s: The first pause in seconds (default 30).
        longest_pause_s: The cap on a pause in seconds (default 900).
        clock: Monotonic seconds (default ``time.monotonic``).
    """

    def __init__(
        self,
        tries_before_pause: int = TRIES_BEFORE_PAUSE,
        first_pause_s: float = FIRST_PAUSE_S,
        longest_pause_s: float = LONGEST_PAUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tries_before_pause = tries_before_pause
        self.first_pause_s, self.longest_pause_s = first_pause_s, longest_pause_s
        self.clock = clock
        self._wrong = 0
        self._paused_until = -math.inf
        self._lock = threading.Lock()

    def wait_s(self) -> float:
        """Seconds until a password may be tried again; 0 when it may be now."""
        with self._lock:
            return max(0.0, self._paused_until - self.clock())

    def failed(self) -> float:
        """Count a wrong password; returns the pause it starts in seconds (0 for none)."""
        with self._lock:
            self._wrong += 1
            over = self._wrong - self.tries_before_pause
            if over < 0:
                return 0.0
            pause = min(self.first_pause_s * 2.0 ** min(over, 64), self.longest_pause_s)
            self._paused_until = self.clock() + pause
            return pause

    def succeeded(self) -> None:
        """A right password: the count starts again."""
        with self._lock:
            self._wrong, self._paused_until = 0, -math.inf


def pause_message(wait_s: float, longest_pause_s: float, now: Callable[[], float] = time.time) -> str:
    """The notice of a pause: how long it lasts yet, the local time it ends, and the longest a pause gets."""
    seconds = math.ceil(wait_s)
    until = time.strftime("%H:%M:%S", time.localtime(now() + seconds))
    return (
        f"Too many wrong passwords: sign-in is paused for {seconds} s (until {until}). Try again then; "
        f"each further wrong password doubles the pause, up to {duration(longest_pause_s)}."
    )


def duration(seconds: float) -> str:
    """``"45 s"``, ``"15 min"``: a length of time as a person reads it."""
    return f"{math.ceil(seconds)} s" if seconds < 120 else f"{math.ceil(seconds / 60)} min"


#: The process's throttle, shared by every session (``app.ui.signin`` reads it at each run).
THROTTLE = SignInThrottle()
