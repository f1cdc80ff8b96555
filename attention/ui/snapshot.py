"""Save the current view as a JSON snapshot, or load one back into the sidebar."""
from __future__ import annotations

import streamlit as st

from attention.errors import UserError
from attention.spec import AttentionSpec
from attention.ui import cache, state
from attention.ui.text import message, t

UPLOAD_KEY, PENDING_KEY, BOX_KEY = "snapshot_file", "snapshot_pending", "snapshot_box"


def _apply_upload() -> None:
    """Callback (runs before the script): put the snapshot's spec into the sidebar widgets."""
    from attention.files import snapshot     # with torch, only once a snapshot is used ("Imports")

    file = st.session_state.get(UPLOAD_KEY)
    if file is None:
        return
    try:
        spec, data = snapshot.load(file.getvalue())
    except UserError as err:
        st.session_state[PENDING_KEY] = ("error", err)
        return
    state.load_spec(spec)
    st.session_state[PENDING_KEY] = ("check", data)


def snapshot_box(container, spec: AttentionSpec) -> None:
    """Save and load a snapshot, drawn only while open (opening it reruns the page): closed,
    its uploader and button are not in the sidebar every click renders again."""
    with container.expander(t("snapshot.title"), icon=":material/save:", key=BOX_KEY,
                            on_change="rerun") as box:
        if not box.open:
            return
        from attention.files import snapshot     # with torch, only once the box is open ("Imports")

        st.caption(t("snapshot.help"))
        st.download_button(t("snapshot.download"), data=lambda: snapshot.dumps(cache.analysis(spec)),
                           file_name="attention-snapshot.json", mime="application/json",
                           icon=":material/download:", on_click="ignore", key="snapshot_save")
        st.file_uploader(t("snapshot.upload"), type=["json"], key=UPLOAD_KEY,
                         on_change=_apply_upload)
        kind, payload = st.session_state.pop(PENDING_KEY, (None, None))
        if kind == "error":
            st.error(message(payload))
        elif kind == "check":
            diff = snapshot.compare(cache.analysis(spec), payload)
            if diff <= 1e-5:
                st.success(t("snapshot.loaded", diff=diff))
            else:
                st.warning(t("snapshot.mismatch", diff=diff))
