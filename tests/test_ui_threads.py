"""attention.ui sets one torch thread for every computation a session runs, in any thread."""
from tests.fresh import run_fresh


def _threads_seen(before: str, page: str) -> str:
    """Run `before`, then a page thread that runs `page`, then two session threads that each
    import torch, multiply and report torch.get_num_threads(); what they reported."""
    code = (before + "import threading\n"
            "seen = []\n"
            "def page():\n"
            f"    {page}\n"
            "def session():\n"
            "    import torch\n"
            "    x = torch.ones(64, 64); (x @ x).sum()\n"
            "    seen.append(torch.get_num_threads())\n"
            "for target in (page, session, session):\n"
            "    t = threading.Thread(target=target); t.start(); t.join()\n"
            "print(seen)\n")
    return run_fresh(code).strip()


def test_importing_the_ui_gives_later_threads_one_torch_thread():
    """A Streamlit script run is a new thread: after `import attention.ui` (in another thread,
    as the first page does) a fresh thread's torch ops run on one intra-op thread, even when
    torch was imported and set to two threads before."""
    assert _threads_seen("import torch\ntorch.set_num_threads(2)\n",
                         "import attention.ui") == "[1, 1]"


def test_a_thread_after_the_ui_and_a_later_torch_import_runs_one_torch_thread():
    """The usual order on a server: attention.ui first (no torch), torch imported later by a
    page that computes; every session thread then runs on one intra-op thread."""
    assert _threads_seen("", "import attention.ui, attention.ui.views.heatmap") == "[1, 1]"


def test_the_ui_sets_one_openmp_and_mkl_thread_before_torch_loads():
    """OMP_NUM_THREADS and MKL_NUM_THREADS are read when torch loads: attention.ui must set
    them before any page imports torch, or every new thread's first matmul sets up MKL's
    threads again (bench/threads.py). An import hook records them at the moment torch is
    imported, by a page's module after attention.ui (which itself no longer imports torch:
    a page that reads stored results never loads it)."""
    code = ("import os, sys\n"
            "seen = {}\n"
            "class Spy:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' and not seen:\n"
            "            seen.update({v: os.environ.get(v) for v in\n"
            "                         ('OMP_NUM_THREADS', 'MKL_NUM_THREADS')})\n"
            "        return None\n"
            "os.environ.pop('OMP_NUM_THREADS', None); os.environ.pop('MKL_NUM_THREADS', None)\n"
            "sys.meta_path.insert(0, Spy())\n"
            "import attention.ui\n"
            "assert 'torch' not in sys.modules\n"
            "import attention.ui.views.heatmap\n"
            "print(seen)\n")
    assert run_fresh(code).strip() == "{'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}"
