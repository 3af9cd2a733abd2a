"""The synth stage's ``task: agent``: the tool-use task's questions as a prompts stage, and the search tool's corpus
beside them; a train and a test step with one seed share the world and never a book."""

from reasonkit.gen.tools.search import make_search
from reasonkit.recipes.tasks.synth import SynthConfig, run_synth
from reasonkit.store import read_stage


def test_train_and_test_share_one_corpus_and_no_book(tmp_path):
    run_synth(SynthConfig(out=str(tmp_path / "train"), n=60, task="agent", split="train", seed=0))
    run_synth(SynthConfig(out=str(tmp_path / "test"), n=20, task="agent", split="test", seed=0))
    train, test = (read_stage(tmp_path / s).to_pylist() for s in ("train", "test"))
    assert len(train) == 60 and len(test) == 20
    assert not {r["book"] for r in train} & {r["book"] for r in test}
    corpus = (tmp_path / "train" / "corpus.jsonl").read_bytes()
    assert corpus == (tmp_path / "test" / "corpus.jsonl").read_bytes()
    search = make_search(str(tmp_path / "test" / "corpus.jsonl"), k=1)
    row = test[0]
    assert row["author"] in search(row["book"]), "the first hop: the book's passage names its author"
    assert row["answer"] in search(f"{row['author']} {row['prize']}"), "the second hop: the year"
    assert row["messages"][0]["content"].startswith(
        f'What year did the author of "{row["book"]}" win the {row["prize"]}?'
    )
