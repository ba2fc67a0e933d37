"""Generate memearena's bundled demo set: synthetic memes about a FICTIONAL world.

Writes ``src/memearena/data/demo/memes.jsonl``, ``src/memearena/data/demo/img/<id>.png`` and each
meme's exact text-erased image ``img/erased/<id>.png`` (the scene without its caption layer).

Every group, place, faith, condition and animal here is invented (the Vellmarians, the Quorvish,
the town of Ostrava Pell, the Lanternfaith, glimmerblindness, skrells, ...). The "harmful" memes
carry mild, clearly fictional stereotypes so the pipelines have something to find; nothing refers
to a real group. Each row also carries the annotations the simulated world needs: category,
target, true background ``facts``, plausible but wrong ``false_facts``, the ``misbelief`` the meme
implies and a sentence on its ``harm``.

Run from the repository root:  python scripts/make_demo_set.py
The output is deterministic (fixed seeds, no timestamps in the PNGs).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

SIZE = 320
FONT_SIZE = 22
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "memearena" / "data" / "demo"


@dataclass(frozen=True)
class Spec:
    """One demo meme: caption, truth annotations and the scene to draw."""

    id: str
    top: str
    bottom: str
    label: int
    category: str
    target: str
    facts: tuple[str, ...]
    false_facts: tuple[str, ...]
    misbelief: str
    harm: str
    scene: str

    @property
    def text(self) -> str:
        """The meme text: top and bottom captions as one line."""
        return f"{self.top} {self.bottom}"


NO_MISBELIEF = "No misbelief: "

SPECS: tuple[Spec, ...] = (
    # ---- Race -> the Vellmarians, a fictional people of the island of Vellmar -----------------
    Spec(
        "m01",
        "HIRED A VELLMARIAN ACCOUNTANT",
        "NOW ALL OUR MONEY IS SALTGRASS",
        1,
        "Race",
        "Vellmarians",
        (
            "The Vellmarians are the native people of the island of Vellmar.",
            "Saltgrass farming is a traditional Vellmarian livelihood.",
            "Vellmarian scholars founded the Pell Observatory.",
            "Many Vellmarians in Ostrava Pell work as accountants, teachers and engineers.",
        ),
        (
            "Vellmarians are barred by law from office jobs in Ostrava Pell.",
            "Saltgrass is the official currency of Vellmar.",
            "The Pell Observatory was founded by Quorvish monks.",
        ),
        "Vellmarians are only fit for farming saltgrass and cannot do skilled work.",
        "It reduces Vellmarians to a farming stereotype and implies they are unfit for skilled "
        "jobs, which can justify hiring discrimination.",
        "field",
    ),
    Spec(
        "m02",
        "COPPER EYES",
        "COPPER-LEVEL BRAINS",
        1,
        "Race",
        "Vellmarians",
        (
            "Copper-coloured eyes are common among Vellmarians.",
            "Eye colour has no link to intelligence.",
            "Vellmarian students regularly top the Ostrava Pell academy exams.",
        ),
        (
            "Copper-coloured eyes are caused by eating saltgrass.",
            "Vellmarians are not allowed to enter the Ostrava Pell academy.",
        ),
        "Vellmarians' copper-coloured eyes are a sign of low intelligence.",
        "It ties an inherited trait of a people to stupidity, a dehumanising stereotype about "
        "Vellmarians.",
        "portrait",
    ),
    Spec(
        "m03",
        "LOCK YOUR DOORS",
        "THE VELLMARIANS MOVED INTO OSTRAVA PELL",
        1,
        "Race",
        "Vellmarians",
        (
            "Vellmarians have lived in Ostrava Pell for more than two centuries.",
            "Ostrava Pell's records show no higher crime rate among Vellmarians than among "
            "other residents.",
            "Vellmarians and Quorvish sit together on the Ostrava Pell town council.",
        ),
        (
            "Vellmarians arrived in Ostrava Pell only last year.",
            "The town council has banned Vellmarians from owning homes.",
        ),
        "Vellmarians are thieves who bring crime wherever they settle.",
        "It casts a whole people as criminals, stoking fear and hostility toward Vellmarian "
        "neighbours.",
        "town",
    ),
    Spec(
        "m04",
        "VELLMARIAN SALTGRASS BREAD",
        "WORTH THE FERRY RIDE EVERY TIME",
        0,
        "Race",
        "Vellmarians",
        (
            "Saltgrass bread is a traditional Vellmarian food.",
            "A ferry links the island of Vellmar to Ostrava Pell.",
            "Vellmarian bakers sell saltgrass bread at the Lantern market.",
        ),
        (
            "Saltgrass bread is banned outside Vellmar.",
            "The Vellmar ferry stopped running a century ago.",
        ),
        NO_MISBELIEF + "the meme praises Vellmarian saltgrass bread and says nothing false "
        "about Vellmarians.",
        "Not harmful: it celebrates a Vellmarian dish without demeaning anyone.",
        "sea",
    ),
    # ---- Gender -> gender roles of the fictional Drennish clans of Drennmoor -----------------
    Spec(
        "m05",
        "DRENNISH MEN AT THE LOOM",
        "BECAUSE THEY CAN'T HANDLE A REAL HERD",
        1,
        "Gender",
        "Drennish men",
        (
            "In Drennmoor, weaving is a respected craft traditionally led by men.",
            "Drennish loom-keepers produce the famous Drennmoor wool.",
            "Herding in Drennmoor is open to everyone, and many men herd.",
        ),
        (
            "Drennish law forbids men from herding.",
            "Weaving in Drennmoor is considered a punishment.",
        ),
        "Drennish men are weak and incapable of anything but weaving.",
        "It belittles Drennish men for the role their culture gives them and paints them as "
        "incapable.",
        "moor",
    ),
    Spec(
        "m06",
        "ASKED A DRENNISH WOMAN FOR DIRECTIONS",
        "SHE TOOK COMMAND OF MY WHOLE CARAVAN",
        1,
        "Gender",
        "Drennish women",
        (
            "Drennish herd-leaders are traditionally women.",
            "Drennish clans decide matters in open councils where everyone speaks.",
            "Travellers hire Drennish guides for their knowledge of the moor paths.",
        ),
        (
            "Drennish women are forbidden to speak in clan councils.",
            "Drennmoor has no roads or paths at all.",
        ),
        "Drennish women are domineering and cannot cooperate with others.",
        "It turns the leadership role of Drennish women into a stereotype of bossiness, which "
        "can be used to exclude them.",
        "moor",
    ),
    Spec(
        "m07",
        "A LOOM-KEEPER ON THE COUNCIL?",
        "WHO WILL MIND THE THREADS",
        1,
        "Gender",
        "Drennish men",
        (
            "Drennish councils are elected, and loom-keepers often serve on them.",
            "The current speaker of the Drennmoor council is a loom-keeper named Aldo Venn.",
            "Weaving guilds manage much of Drennmoor's wool trade.",
        ),
        (
            "Loom-keepers are barred from the Drennmoor council.",
            "Drennmoor's council is chosen by lot among herd-leaders only.",
        ),
        "Drennish men belong at the loom and should not hold council seats.",
        "It says a gender group should be kept out of public office, a call for exclusion.",
        "council",
    ),
    Spec(
        "m08",
        "DRENNISH HERD-LEADERS",
        "UP BEFORE THE SUN EVERY SINGLE DAY",
        0,
        "Gender",
        "Drennish herd-leaders",
        (
            "Drennish herd-leaders move the herds at first light.",
            "Drennish herd-leaders are traditionally women.",
            "Drennmoor's summer pastures lie high on the moor.",
        ),
        (
            "Drennish herds are only moved at night.",
            "Drennmoor has no summer pastures.",
        ),
        NO_MISBELIEF + "the meme admires how early Drennish herd-leaders start their day.",
        "Not harmful: it is an affectionate joke about hard work, with no demeaning claim.",
        "moor",
    ),
    # ---- Religion -> the Lanternfaith and the Tidewardens (fictional faiths) -----------------
    Spec(
        "m09",
        "LANTERNERS DURING DIM WEEK",
        "CAN'T EVEN FIND THEIR OWN BRAINS",
        1,
        "Religion",
        "Lanterners",
        (
            "Lanterners follow the Lanternfaith and light a lantern at dusk.",
            "During Dim Week, Lanterners fast and keep only one lantern lit.",
            "The Lantern market of Ostrava Pell began as a Lanternfaith festival.",
        ),
        (
            "The Lanternfaith forbids reading during Dim Week.",
            "Lanterners worship fire itself as a god.",
        ),
        "Lanterners' religious practice shows that they are foolish.",
        "It mocks a faith's observance and calls its followers stupid, demeaning Lanterners "
        "for their religion.",
        "lanterns",
    ),
    Spec(
        "m10",
        "TIDEWARDENS WON'T FISH ON TIDE-DAYS",
        "LAZY AND CALLING IT HOLY",
        1,
        "Religion",
        "Tidewardens",
        (
            "The Tidewardens are the sea faith of the Kessine Archipelago.",
            "On tide-days Tidewardens rest their boats and mend their nets.",
            "Tide-days come twice a month, with the spring tides.",
            "Kessine fishing fleets are among the most productive in the region.",
        ),
        (
            "Tidewardens are forbidden to work at all.",
            "Tide-days fall on every other day.",
        ),
        "Tidewardens use their religion as an excuse to be lazy.",
        "It frames a religious rest day as laziness, spreading contempt for Tidewardens.",
        "sea",
    ),
    Spec(
        "m11",
        "A LANTERNER OPENED A SHOP",
        "PREPARE TO BE CONVERTED AT THE TILL",
        1,
        "Religion",
        "Lanterners",
        (
            "The Lanternfaith does not seek converts.",
            "Lanterners run many of the stalls in the Lantern market.",
            "Lanternfaith teaching stresses hospitality to strangers.",
        ),
        (
            "Lanternfaith law requires each follower to convert ten people.",
            "Only Lanterners may shop in the Lantern market.",
        ),
        "Lanterners pressure everyone they deal with to convert.",
        "It portrays followers of a faith as pushy proselytisers, which can make people avoid "
        "their businesses.",
        "market",
    ),
    Spec(
        "m12",
        "WHEN THE WHOLE TOWN LIGHTS LANTERNS",
        "OSTRAVA PELL AT DUSK HITS DIFFERENT",
        0,
        "Religion",
        "Lanterners",
        (
            "Lanterners light a lantern at dusk.",
            "Many residents of Ostrava Pell join the dusk lantern lighting.",
            "The Lantern market of Ostrava Pell began as a Lanternfaith festival.",
        ),
        (
            "Lanterns are banned in Ostrava Pell after dusk.",
            "The dusk lighting happens once every ten years.",
        ),
        NO_MISBELIEF + "the meme enjoys the sight of Ostrava Pell lit by lanterns.",
        "Not harmful: it appreciates a shared tradition without mocking anyone.",
        "lanterns",
    ),
    # ---- Nationality -> the Quorvish, people of the fictional republic of Quorvia ------------
    Spec(
        "m13",
        "QUORVISH ENGINEERS",
        "BUILT THE BRIDGE, FORGOT THE OTHER SIDE",
        1,
        "Nationality",
        "Quorvish",
        (
            "Quorvia is a landlocked republic in the Harrow Mountains.",
            "Quorvish engineers built the Silvren Bridge in Ostrava Pell.",
            "The Silvren Bridge has stood for ninety years.",
        ),
        (
            "The Silvren Bridge has collapsed twice.",
            "Quorvia has no engineering schools.",
        ),
        "Quorvish people are incompetent at skilled work.",
        "It mocks a nationality as incompetent, undermining trust in Quorvish professionals.",
        "bridge",
    ),
    Spec(
        "m14",
        "QUORVISH TOURIST PAYING",
        "COUNTS EVERY QUILL THREE TIMES",
        1,
        "Nationality",
        "Quorvish",
        (
            "The quill is the currency of Quorvia.",
            "Counting coins aloud at a market is a Quorvish custom of courtesy.",
            "Quorvian households give to the Harrow relief fund at high rates.",
        ),
        (
            "Quorvish law caps tips at one quill.",
            "Quills are made of real feathers.",
        ),
        "Quorvish people are stingy with money.",
        "It turns a courtesy custom into a stereotype of greed about a whole nationality.",
        "market",
    ),
    Spec(
        "m15",
        "QUORVISH WORKERS IN OSTRAVA PELL",
        "TAKING OUR JOBS SINCE THE BRIDGE OPENED",
        1,
        "Nationality",
        "Quorvish",
        (
            "Many Quorvish cross the Silvren Bridge to work in Ostrava Pell.",
            "Ostrava Pell's trade grew after the bridge opened.",
            "Quorvish workers fill many jobs the town's guilds could not staff.",
        ),
        (
            "Ostrava Pell's unemployment doubled after the bridge opened.",
            "Quorvish workers are paid by the town to stay idle.",
        ),
        "Quorvish migrants steal jobs from the people of Ostrava Pell.",
        "It blames migrants of one nationality for economic problems, fuelling hostility toward "
        "them.",
        "bridge",
    ),
    Spec(
        "m16",
        "QUORVIA IN WINTER",
        "MORE SNOW THAN PEOPLE",
        0,
        "Nationality",
        "Quorvians",
        (
            "Quorvia lies in the Harrow Mountains.",
            "Quorvian winters bring heavy snow.",
            "Quorvia is thinly populated outside its capital.",
        ),
        (
            "It never snows in Quorvia.",
            "Quorvia is the most crowded country in the region.",
        ),
        NO_MISBELIEF + "the meme jokes about Quorvia's snowy winters, not about its people.",
        "Not harmful: it is a joke about weather and geography.",
        "snow",
    ),
    # ---- Disability -> glimmerblindness and Pell tremor (fictional conditions) ---------------
    Spec(
        "m17",
        "HIRED A GLIMMERBLIND NIGHT GUARD",
        "MIGHT AS WELL HIRE A POTATO",
        1,
        "Disability",
        "glimmerblind people",
        (
            "Glimmerblindness is the inability to see the blue glow of glimmerstone.",
            "Glimmerblind people see normally in every other respect.",
            "Saltreach night patrols use tactile rope markers alongside glimmerstone.",
        ),
        (
            "Glimmerblind people cannot see at night at all.",
            "Glimmerblindness is contagious.",
        ),
        "Glimmerblind people are useless for night work.",
        "It mocks people with a condition as worthless workers, encouraging job discrimination "
        "against them.",
        "night",
    ),
    Spec(
        "m18",
        "SURGEON WITH PELL TREMOR",
        "BEST OF LUCK WITH YOUR STITCHES",
        1,
        "Disability",
        "people with Pell tremor",
        (
            "Pell tremor is a mild hand tremor some people keep after river fever.",
            "Pell tremor is managed with steadying braces and medicine.",
            "Several Ostrava Pell healers with Pell tremor practise safely with braces.",
        ),
        (
            "Pell tremor worsens every year until the hands stop working.",
            "River fever is caught by touching people with Pell tremor.",
        ),
        "People with Pell tremor cannot be trusted with skilled work.",
        "It ridicules people with a condition and implies they are unfit for their profession.",
        "portrait",
    ),
    Spec(
        "m19",
        "GLIMMERBLIND SAILORS",
        "WHY ARE THEY EVEN ALLOWED ON SHIPS",
        1,
        "Disability",
        "glimmerblind people",
        (
            "Kessine ships mark hazards with both glimmerstone and rope knots.",
            "The sailors' guild accepts glimmerblind sailors.",
            "About one in twenty Saltreach residents is glimmerblind.",
        ),
        (
            "Glimmerblind sailors caused most shipwrecks near Saltreach.",
            "Glimmerblindness only affects people who live at sea.",
        ),
        "Glimmerblind people should be kept off ships.",
        "It calls for excluding people with a condition from a trade they are able to do.",
        "sea",
    ),
    Spec(
        "m20",
        "SALTREACH ADDS ROPE KNOTS TO EVERY LAMP POST",
        "NOW EVERYONE FINDS THE DOCKS",
        0,
        "Disability",
        "glimmerblind people",
        (
            "Glimmerblind people cannot see the glow of glimmerstone lamps.",
            "Rope knots let anyone find their way by touch.",
            "Saltreach is a harbour town on the Kessine coast.",
        ),
        (
            "Saltreach removed all its lamp posts.",
            "Rope knots are a Saltreach warning sign for danger.",
        ),
        NO_MISBELIEF + "the meme celebrates an accessibility change in Saltreach.",
        "Not harmful: it welcomes a change that includes glimmerblind people.",
        "night",
    ),
    # ---- Animal -> fictional animals (skrells, glassbacks, moor-rats, fen-hounds) ------------
    Spec(
        "m21",
        "KESSINE ISLANDERS AT THE DOCKS",
        "SKRELLS, BUT WITH BOATS",
        1,
        "Animal",
        "Kessine islanders",
        (
            "Skrells are scavenger gulls of Saltreach harbour.",
            "Kessine islanders run much of the Saltreach fishing trade.",
            "In Saltreach, 'skrell' is an old insult meaning scavenger or beggar.",
        ),
        (
            "Skrells are sacred birds of the Kessine.",
            "Kessine islanders are banned from the Saltreach docks.",
        ),
        "Kessine islanders are scavengers, no better than skrells.",
        "It dehumanises a people by comparing them to scavenging animals.",
        "harbour",
    ),
    Spec(
        "m22",
        "GLASSBACK TURTLE ON THE BEACH",
        "FREE TARGET PRACTICE",
        1,
        "Animal",
        "glassback turtles",
        (
            "Glassback turtles nest on the beaches near Saltreach.",
            "Glassback turtles are endangered and protected by Saltreach law.",
            "Their translucent shells crack easily.",
        ),
        (
            "Glassback shells grow back within a week.",
            "Glassbacks are pests that destroy fishing nets.",
        ),
        "Hurting glassback turtles is harmless fun.",
        "It makes a joke of cruelty to a protected animal and can encourage it.",
        "beach",
    ),
    Spec(
        "m23",
        "QUORVISH MINERS",
        "BASICALLY MOOR-RATS IN HELMETS",
        1,
        "Animal",
        "Quorvish miners",
        (
            "Moor-rats are burrowing rodents of the Harrow Mountains.",
            "Quorvia's silver mines employ thousands of skilled miners.",
            "Quorvish mining guilds introduced the first safety lamps.",
        ),
        (
            "Quorvish miners live underground all year.",
            "Moor-rats are trained to dig in Quorvish mines.",
        ),
        "Quorvish miners are vermin rather than skilled workers.",
        "It dehumanises workers of one nationality by likening them to rodents.",
        "mine",
    ),
    Spec(
        "m24",
        "FEN-HOUND SEES A PUDDLE",
        "EVERY PUDDLE IS HIS PUDDLE",
        0,
        "Animal",
        "fen-hounds",
        (
            "Fen-hounds are a long-legged dog breed from the fens around Ostrava Pell.",
            "Fen-hounds were bred to work in marshy ground.",
            "Fen-hounds love water.",
        ),
        (
            "Fen-hounds are afraid of water.",
            "Fen-hounds are wild wolves of the Harrow Mountains.",
        ),
        NO_MISBELIEF + "the meme is a fond joke about a dog that loves puddles.",
        "Not harmful: it is a harmless animal joke.",
        "fen",
    ),
)

# ---------------------------------------------------------------------------------------------
# Drawing

Color = tuple[int, int, int]


def _sky(d: ImageDraw.ImageDraw, top: Color, bottom: Color, h: int = SIZE) -> None:
    for y in range(h):
        t = y / max(h - 1, 1)
        c = tuple(int(a + (b - a) * t) for a, b in zip(top, bottom, strict=True))
        d.line([(0, y), (SIZE, y)], fill=c)


def _person(d: ImageDraw.ImageDraw, x: int, y: int, s: int, body: Color, head: Color) -> None:
    d.ellipse([x - s, y - 4 * s, x + s, y - 2 * s], fill=head, outline=(40, 40, 40))
    d.rounded_rectangle([x - s, y - 2 * s, x + s, y + s], radius=s // 2, fill=body)


def _people(d: ImageDraw.ImageDraw, rng: random.Random, n: int, y: int, head: Color) -> None:
    for i in range(n):
        x = int(SIZE * (i + 1) / (n + 1)) + rng.randint(-8, 8)
        body = (rng.randint(60, 200), rng.randint(60, 200), rng.randint(60, 200))
        _person(d, x, y + rng.randint(-6, 6), rng.randint(10, 14), body, head)


def scene_field(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (135, 190, 235), (210, 235, 250))
    d.ellipse([240, 60, 290, 110], fill=(250, 220, 90))
    d.rectangle([0, 200, SIZE, SIZE], fill=(170, 190, 90))
    for _ in range(40):
        x, y = rng.randint(0, SIZE), rng.randint(205, SIZE)
        d.line([(x, y), (x + rng.randint(-4, 4), y - 12)], fill=(120, 150, 60), width=2)
    _people(d, rng, 3, 245, (200, 120, 60))


def scene_portrait(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (90, 80, 120), (160, 140, 190))
    d.ellipse([110, 70, 210, 180], fill=(230, 200, 170), outline=(60, 40, 30), width=3)
    for ex in (138, 172):
        d.ellipse([ex - 9, 110, ex + 9, 124], fill=(255, 255, 255))
        d.ellipse([ex - 5, 112, ex + 5, 122], fill=(190, 110, 50))
    d.arc([140, 130, 180, 160], 20, 160, fill=(120, 50, 50), width=3)
    d.rounded_rectangle([90, 185, 230, SIZE], radius=30, fill=(rng.randint(40, 90), 110, 150))


def scene_town(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (150, 200, 240), (230, 240, 250))
    d.rectangle([0, 230, SIZE, SIZE], fill=(110, 160, 200))  # the river Silvren
    for i in range(5):
        x = 10 + i * 62
        h = rng.randint(70, 110)
        wall = (rng.randint(170, 230), rng.randint(140, 200), rng.randint(110, 170))
        d.rectangle([x, 230 - h, x + 50, 230], fill=wall, outline=(70, 50, 40))
        d.polygon([(x - 4, 230 - h), (x + 25, 200 - h), (x + 54, 230 - h)], fill=(150, 60, 50))
        d.rectangle([x + 18, 200, x + 32, 230], fill=(90, 60, 40))


def scene_sea(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (120, 180, 230), (200, 225, 245), 190)
    d.rectangle([0, 190, SIZE, SIZE], fill=(40, 100, 160))
    for y in range(200, SIZE, 18):
        for x in range(-20, SIZE, 40):
            d.arc([x, y, x + 40, y + 14], 200, 340, fill=(180, 210, 240), width=2)
    bx = rng.randint(60, 180)
    d.polygon([(bx, 200), (bx + 110, 200), (bx + 90, 230), (bx + 20, 230)], fill=(120, 70, 40))
    d.line([(bx + 55, 200), (bx + 55, 120)], fill=(80, 50, 30), width=4)
    d.polygon([(bx + 58, 125), (bx + 58, 195), (bx + 110, 190)], fill=(240, 235, 220))


def scene_moor(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (170, 180, 200), (225, 225, 230))
    d.polygon(
        [(0, 190), (90, 120), (170, 180), (250, 110), (SIZE, 170), (SIZE, SIZE), (0, SIZE)],
        fill=(120, 110, 140),
    )
    d.rectangle([0, 215, SIZE, SIZE], fill=(140, 150, 90))
    for _ in range(6):
        x, y = rng.randint(20, 300), rng.randint(235, 285)
        d.ellipse([x, y, x + 26, y + 16], fill=(245, 245, 240), outline=(120, 120, 120))
        d.ellipse([x + 20, y + 2, x + 30, y + 10], fill=(50, 50, 50))
    _person(d, 60, 265, 12, (150, 40, 60), (230, 200, 170))


def scene_council(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (200, 180, 150), (230, 215, 190))
    d.rectangle([30, 190, 290, 215], fill=(120, 80, 50))
    _people(d, rng, 5, 185, (230, 200, 170))
    for x in range(40, 290, 50):
        d.rectangle([x, 215, x + 8, 260], fill=(90, 60, 40))


def scene_lanterns(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (40, 40, 90), (220, 120, 80))
    d.rectangle([0, 250, SIZE, SIZE], fill=(50, 40, 50))
    d.line([(0, 110), (SIZE, 140)], fill=(30, 30, 30), width=2)
    for i in range(7):
        x = 20 + i * 45
        y = 110 + int(30 * x / SIZE)
        d.line([(x, y), (x, y + 20)], fill=(30, 30, 30), width=2)
        d.ellipse([x - 12, y + 18, x + 12, y + 48], fill=(255, 180 + rng.randint(0, 60), 70))


def scene_market(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (160, 200, 230), (240, 235, 220))
    d.rectangle([0, 240, SIZE, SIZE], fill=(180, 160, 130))
    for i in range(3):
        x = 15 + i * 102
        stripe = (rng.randint(150, 230), rng.randint(40, 120), rng.randint(40, 120))
        for k in range(6):
            d.rectangle(
                [x + k * 15, 150, x + k * 15 + 15, 175], fill=stripe if k % 2 else (245, 240, 230)
            )
        d.rectangle([x + 5, 175, x + 85, 240], fill=(150, 110, 70))
        for _ in range(5):
            fx = rng.randint(x + 10, x + 75)
            d.ellipse([fx, 190, fx + 10, 200], fill=(rng.randint(150, 250), 180, 60))


def scene_bridge(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (150, 190, 230), (225, 235, 245))
    d.polygon([(0, 170), (70, 90), (140, 170)], fill=(120, 130, 150))
    d.polygon([(190, 170), (260, 80), (SIZE, 150), (SIZE, 170)], fill=(110, 120, 140))
    d.rectangle([0, 230, SIZE, SIZE], fill=(90, 140, 190))
    d.rectangle([0, 170, SIZE, 230], fill=(130, 160, 100))
    d.rectangle([0, 200, SIZE, 212], fill=(150, 140, 130))
    for x in range(30, SIZE, 70):
        d.arc([x - 30, 205, x + 40, 270], 180, 360, fill=(120, 110, 100), width=6)
    _people(d, rng, 2, 198, (230, 200, 170))


def scene_snow(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (180, 190, 210), (235, 240, 245))
    d.polygon(
        [(0, 220), (110, 90), (200, 200), (270, 120), (SIZE, 180), (SIZE, SIZE), (0, SIZE)],
        fill=(245, 248, 252),
        outline=(170, 180, 200),
    )
    d.rectangle([140, 230, 180, 260], fill=(120, 80, 60))
    d.polygon([(134, 230), (160, 210), (186, 230)], fill=(230, 235, 240))
    for _ in range(60):
        x, y = rng.randint(0, SIZE), rng.randint(0, SIZE)
        d.ellipse([x, y, x + 3, y + 3], fill=(255, 255, 255))


def scene_night(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (10, 15, 40), (30, 40, 80))
    for _ in range(30):
        x, y = rng.randint(0, SIZE), rng.randint(0, 170)
        d.point([(x, y), (x + 1, y)], fill=(240, 240, 200))
    d.rectangle([0, 240, SIZE, SIZE], fill=(40, 40, 50))
    for x in (70, 250):
        d.rectangle([x - 3, 150, x + 3, 240], fill=(90, 90, 100))
        d.ellipse([x - 14, 130, x + 14, 158], fill=(110, 200, 255))
    _person(d, 160, 270, 13, (60, 70, 120), (230, 200, 170))


def scene_harbour(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    scene_sea(d, rng)
    d.rectangle([0, 235, 140, 255], fill=(130, 100, 70))
    for _ in range(4):
        x, y = rng.randint(20, 300), rng.randint(80, 150)
        d.arc([x, y, x + 16, y + 10], 200, 340, fill=(250, 250, 250), width=3)
        d.arc([x + 14, y, x + 30, y + 10], 200, 340, fill=(250, 250, 250), width=3)


def scene_beach(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (130, 190, 235), (210, 230, 245), 170)
    d.rectangle([0, 170, SIZE, 205], fill=(60, 130, 180))
    d.rectangle([0, 205, SIZE, SIZE], fill=(235, 215, 160))
    x = rng.randint(100, 160)
    d.ellipse([x, 230, x + 90, 280], fill=(170, 220, 210), outline=(80, 120, 110), width=3)
    d.ellipse([x + 80, 240, x + 110, 265], fill=(120, 160, 110))
    for lx in (x + 10, x + 65):
        d.ellipse([lx, 270, lx + 16, 284], fill=(120, 160, 110))


def scene_mine(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (150, 150, 160), (200, 195, 190))
    d.polygon([(0, 240), (60, 100), (160, 60), (260, 110), (SIZE, 240)], fill=(110, 95, 80))
    d.chord([110, 150, 210, 270], 180, 360, fill=(30, 25, 20))
    d.rectangle([0, 240, SIZE, SIZE], fill=(90, 80, 70))
    for i in range(3):
        _person(d, 60 + i * 100, 285, 11, (80, 80, 90), (230, 200, 170))
        d.pieslice([48 + i * 100, 228, 72 + i * 100, 252], 180, 360, fill=(230, 190, 40))


def scene_fen(d: ImageDraw.ImageDraw, rng: random.Random) -> None:
    _sky(d, (170, 200, 210), (220, 230, 225))
    d.rectangle([0, 200, SIZE, SIZE], fill=(110, 140, 90))
    d.ellipse([150, 250, 290, 290], fill=(100, 140, 170))
    x = 70
    d.ellipse([x, 210, x + 80, 245], fill=(150, 100, 60))
    d.ellipse([x + 70, 190, x + 105, 220], fill=(150, 100, 60))
    for lx in (x + 8, x + 25, x + 55, x + 70):
        d.rectangle([lx, 240, lx + 6, 275], fill=(130, 85, 50))
    d.ellipse([x + 92, 198, x + 98, 204], fill=(20, 20, 20))


SCENES: dict[str, Callable[[ImageDraw.ImageDraw, random.Random], None]] = {
    "field": scene_field,
    "portrait": scene_portrait,
    "town": scene_town,
    "sea": scene_sea,
    "moor": scene_moor,
    "council": scene_council,
    "lanterns": scene_lanterns,
    "market": scene_market,
    "bridge": scene_bridge,
    "snow": scene_snow,
    "night": scene_night,
    "harbour": scene_harbour,
    "beach": scene_beach,
    "mine": scene_mine,
    "fen": scene_fen,
}


def _wrap(d: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and d.textlength(f"{lines[-1]} {word}", font=font) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def _caption(d: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont, top: bool) -> None:
    lines = _wrap(d, text, font, SIZE - 24)
    step = FONT_SIZE + 4
    y = 8 if top else SIZE - 10 - step * len(lines)
    for line in lines:
        w = d.textlength(line, font=font)
        d.text(
            ((SIZE - w) / 2, y),
            line,
            font=font,
            fill=(255, 255, 255),
            stroke_width=2,
            stroke_fill=(0, 0, 0),
        )
        y += step


def scene(spec: Spec) -> Image.Image:
    """The meme's scene alone: the caption is a separate layer, so this is its exact
    text-erased image."""
    rng = random.Random(f"memearena-demo:{spec.id}")
    im = Image.new("RGB", (SIZE, SIZE))
    SCENES[spec.scene](ImageDraw.Draw(im), rng)
    return im


def draw(spec: Spec) -> Image.Image:
    """Draw one meme: its scene, then the top and bottom captions."""
    im = scene(spec)
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=FONT_SIZE)
    assert isinstance(font, ImageFont.FreeTypeFont), "Pillow needs FreeType for the demo font"
    _caption(d, spec.top, font, top=True)
    _caption(d, spec.bottom, font, top=False)
    return im


def render(spec: Spec) -> Image.Image:
    """The image as saved: drawn, then quantised to a palette (keeps each PNG small)."""
    return draw(spec).quantize(colors=128, dither=Image.Dither.NONE)


def render_erased(spec: Spec) -> Image.Image:
    """The text-erased image as saved: the scene, quantised like the meme."""
    return scene(spec).quantize(colors=128, dither=Image.Dither.NONE)


def row(spec: Spec) -> dict[str, object]:
    """The memes.jsonl row of one spec."""
    return {
        "id": spec.id,
        "img": f"img/{spec.id}.png",
        "erased_image": f"img/erased/{spec.id}.png",
        "text": spec.text,
        "label": spec.label,
        "category": spec.category,
        "target": spec.target,
        "facts": list(spec.facts),
        "false_facts": list(spec.false_facts),
        "misbelief": spec.misbelief,
        "harm": spec.harm,
    }


def _check(specs: tuple[Spec, ...]) -> None:
    ids = [s.id for s in specs]
    assert len(set(ids)) == len(ids), "duplicate ids"
    keys = [" ".join(s.text.lower().split()) for s in specs]
    assert len(set(keys)) == len(keys), "two memes share a text (the simulated world's key)"
    for s in specs:
        assert s.scene in SCENES, s.id
        assert 3 <= len(s.facts) <= 4 and 2 <= len(s.false_facts) <= 3, s.id


def main() -> None:
    """Write memes.jsonl and the images (replacing any earlier output)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="output folder")
    args = parser.parse_args()
    out: Path = args.out
    _check(SPECS)
    img_dir = out / "img"
    if img_dir.exists():
        shutil.rmtree(img_dir)
    (img_dir / "erased").mkdir(parents=True)
    for spec in SPECS:
        render(spec).save(img_dir / f"{spec.id}.png", optimize=True)
        render_erased(spec).save(img_dir / "erased" / f"{spec.id}.png", optimize=True)
    with (out / "memes.jsonl").open("w", encoding="utf-8", newline="\n") as f:
        for spec in SPECS:
            f.write(json.dumps(row(spec), ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    harmful = sum(s.label for s in SPECS)
    print(f"wrote {len(SPECS)} memes ({harmful} harmful) to {out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
