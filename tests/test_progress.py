"""The shared progress bar: redrawn in place on a terminal, whole lines in a log."""

import io

from smallgemm.api import precompile
from smallgemm.progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_one_line_redrawn():
    out = Terminal()
    bar = ProgressBar(4, "epoch 1", width=8, stream=out)
    bar.update(1, "loss 2.5")
    bar.update(2)
    bar.close("done")
    assert out.getvalue() == (
        "\repoch 1 [##......] 1/4 loss 2.5\033[K"
        "\repoch 1 [####....] 2/4\033[K"
        "\repoch 1 [########] 4/4 done\033[K\n"
    )


def test_a_log_gets_the_last_line_or_a_line_per_step():
    quiet = io.StringIO()
    bar = ProgressBar(3, "epoch 1", width=6, stream=quiet)
    for done in range(1, 4):
        bar.update(done, f"batch {done}")
    bar.close("test 98 %")
    assert quiet.getvalue() == "epoch 1 [######] 3/3 test 98 %\n"
    each = io.StringIO()
    bar = ProgressBar(2, width=4, stream=each, log_each=True)
    bar.update(1, "a")
    bar.update(2, "b")
    bar.close()
    assert each.getvalue() == "[##..] 1/2 a\n[####] 2/2 b\n"


def test_compile_reports_each_entry_on_the_shared_bar():
    out = io.StringIO()
    report = precompile.progress_bar(out)
    report(1, 2, precompile.Compiled("BLOCKED", "avx2", "float32", 4.25, False))
    report(2, 2, precompile.Compiled("PACK", "avx2", "float32", 0.01, True))
    assert out.getvalue().splitlines() == [
        "[###############...............] 1/2 avx2 float32 BLOCKED (4.2 s)",
        "[##############################] 2/2 avx2 float32 PACK (cached)",
    ]
