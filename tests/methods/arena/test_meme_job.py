"""One prompt sent to every judge is the same message objects (the model layer encodes a message
once per object); the prepared image and those messages leave memory together."""

from __future__ import annotations

from types import SimpleNamespace

from memearena.config import DatasetConfig, ImageConfig
from memearena.data import load_dataset, prepare_image
from memearena.methods.arena.stages import _MemeJob
from memearena.models.types import ImagePart, Message, TextPart


def test_a_prompt_is_sent_as_the_same_messages_until_the_image_is_dropped() -> None:
    meme = load_dataset(DatasetConfig(format="demo", limit=1)).memes[0]
    assert meme.image_path is not None
    sha = prepare_image(meme.image_path, ImageConfig()).sha256
    pipe = SimpleNamespace(cfg=SimpleNamespace(image=ImageConfig()))
    job = _MemeJob(pipe, 0, meme)  # type: ignore[arg-type]
    job.sha = sha
    keyed = [
        Message("system", (TextPart("rules"),)),
        Message("user", (TextPart("judge"), ImagePart("", sha))),
    ]
    first = job.with_image(keyed)
    assert first is job.with_image(keyed)  # every judge: the same objects
    assert first[0] is keyed[0] and first[1] is not keyed[1]
    sent = first[1].content[1]
    assert isinstance(sent, ImagePart) and sent.sha256 == sha and sent.data_url
    other = [Message("user", (TextPart("judge"), ImagePart("", sha)))]  # equal, not the same
    assert job.with_image(other) is not first and job.with_image(other)[0] == first[1]
    job.drop_image()
    assert job.part is None and not job.sent
    assert job.with_image(keyed) is not first and job.with_image(keyed) == first
