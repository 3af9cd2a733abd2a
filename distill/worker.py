"""What each process that ``launcher: accelerate`` starts runs: train the config in a JSON file.

``accelerate launch -m reasonkit.distill.worker SETTINGS.json`` (distill/launch.py builds that command).
Its own module because it calls train(), and train() calls launch: in launch.py it closed a circle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reasonkit.distill.launch import MARK, is_main
from reasonkit.errors import UserError


def main(argv: list[str] | None = None) -> None:
    """Each launched process: train the config in the JSON file ``argv[0]``."""
    from reasonkit.config import from_dict
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.train import train

    (path,) = argv if argv is not None else sys.argv[1:]
    main_process = is_main()

    def say(message: str) -> None:
        if main_process:
            print(MARK + message, file=sys.stderr, flush=True)

    try:
        cfg = from_dict(TrainConfig, json.loads(Path(path).read_text()), "train")
        train(cfg, progress=False, log=say)
    except UserError as e:
        print(f"{MARK}error: {e}", file=sys.stderr, flush=True)  # every process: any may be the one that failed
        sys.exit(e.exit_code)


if __name__ == "__main__":  # accelerate launch -m reasonkit.distill.worker SETTINGS.json
    main()
