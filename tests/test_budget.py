"""The status page's budget tables (lib.sphinxext.budget): what is over budget is marked, the
idle bench counts only while its chapter's code is the code that was benchmarked."""

from lib.sphinxext.budget import budget_rows

BUILD = {
    "book/07-x/a.md": {"wall_s": 50.0, "cpu_s": 20.0, "peak_rss_gib": 0.3},
    "book/07-x/b.md": {"wall_s": 70.0, "cpu_s": 35.0, "peak_rss_gib": 2.5},
    "book/08-y/c.md": {"wall_s": 10.0, "cpu_s": 9.0, "peak_rss_gib": 0.2},
}
BENCH = {
    "notebooks": [
        {"notebook": "book/07-x/a.md", "wall_s": 31.0, "peak_rss_gib": 0.3, "stamp": "s07"},
        {"notebook": "book/08-y/c.md", "wall_s": 45.0, "peak_rss_gib": 0.2, "stamp": "old"},
    ]
}


def test_over_budget_cells_are_marked_and_a_stale_bench_is_ignored():
    nb_rows, ch_rows = budget_rows(BUILD, BENCH, {"07": "s07", "08": "new"})
    rows = {cells[0]: (cells, over) for cells, over in nb_rows}
    # a: the current idle bench (31 s) is over 30 s although this build's CPU time is not
    cells, over = rows["book/07-x/a.md"]
    assert cells[4] == "31.0" and cells[5] == "OVER" and {4, 5} <= over
    # b: no bench; this build's CPU seconds (35) are over, and so is its memory (2.5 GiB)
    cells, over = rows["book/07-x/b.md"]
    assert cells[5] == "OVER" and {1, 3, 5} <= over
    # c: its chapter changed since the bench: shown as stale, judged on this build (9 s)
    cells, over = rows["book/08-y/c.md"]
    assert cells[4] == "stale" and cells[5] == "within" and not over
    chapters = {cells[0]: (cells, over) for cells, over in ch_rows}
    # 07 has an idle bench for one notebook only: judged on this build's CPU total (55 s)
    assert chapters["07"][0][3] == "within" and chapters["08"][0][3] == "within"
    assert chapters["07"][0][1] == "55.0"


def test_a_chapter_over_sixty_seconds_is_over():
    build = {f"book/09-z/n{k}.md": {"wall_s": 30.0, "cpu_s": 25.0} for k in range(3)}
    _, ch_rows = budget_rows(build, {}, {"09": "s"})
    cells, over = ch_rows[0]
    assert cells == ["09", "75.0", "-", "OVER"] and over == {1, 3}
