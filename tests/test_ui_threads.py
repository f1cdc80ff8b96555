"""attention.ui sets one torch thread for every computation a session runs, in any thread."""
from tests.fresh import run_fresh


def test_importing_the_ui_gives_later_threads_one_torch_thread():
    """A Streamlit script run is a new thread: after `import attention.ui` (in another thread,
    as the first page does) a fresh thread's torch ops run on one intra-op thread."""
    code = ("import threading, torch\n"
            "torch.set_num_threads(2)\n"
            "seen = []\n"
            "def page():\n"
            "    import attention.ui\n"
            "def session():\n"
            "    x = torch.ones(64, 64); (x @ x).sum()\n"
            "    seen.append(torch.get_num_threads())\n"
            "for target in (page, session, session):\n"
            "    t = threading.Thread(target=target); t.start(); t.join()\n"
            "print(seen)\n")
    assert run_fresh(code).strip() == "[1, 1]"
