"""The UI's sign-in form: when ``SEMSEARCH_UI_PASSWORD`` is set, every browser session gives it first.

Wrong passwords of every session count together (``app.ui.lockout``): after a
few, sign-in pauses for a while, and a password given during a pause is
refused unchecked, with when to try again.
"""

from __future__ import annotations

import hmac
import os

import streamlit as st

from app.ui import lockout
from app.ui.guard import ENV_PASSWORD
from app.ui.markup import BRAND


def signed_in() -> bool:
    """True when no password is set or this session gave it; else shows the sign-in form and returns False.

    A right password marks the session (``st.session_state["signed_in"]``) and
    reruns the page; a wrong one counts towards the pause of ``lockout.THROTTLE``.
    """
    expected = os.environ.get(ENV_PASSWORD)
    if not expected or st.session_state.get("signed_in"):
        return True
    throttle = lockout.THROTTLE
    st.html(BRAND)
    with st.form("sign-in"):
        given = st.text_input("Password", type="password", key="password")
        submitted = st.form_submit_button("Sign in")
    wait = throttle.wait_s()
    if not submitted:
        if wait:
            st.warning(lockout.pause_message(wait, throttle.longest_pause_s), icon=":material/hourglass_top:")
        return False
    if wait:
        st.error(lockout.pause_message(wait, throttle.longest_pause_s))
        return False
    if hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8", "replace")):
        throttle.succeeded()
        st.session_state["signed_in"] = True
        st.session_state.pop("password", None)
        st.rerun()
    pause = throttle.failed()
    st.error("Wrong password." + (" " + lockout.pause_message(pause, throttle.longest_pause_s) if pause else ""))
    return False
