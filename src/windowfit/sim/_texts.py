"""Texts for the files that simulated agents read.

By default the texts are generated here, deterministically, as prose in the script
concerned (Russian in Cyrillic, English in Latin letters), so that a fresh clone can run
every scenario with nothing else on disk. The generator composes sentences from word lists
with inflected forms, dialogue, names and punctuation, which gives token statistics close
to real prose of the same language (measured against the public-domain novels in
``../shared/data/texts``: see :data:`MEASURED`). ``DirectoryTexts`` takes the texts from
real files instead (``windowfit demo --texts DIR``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

__all__ = [
    "LANGUAGES",
    "MEASURED",
    "DirectoryTexts",
    "GeneratedTexts",
    "TextSource",
    "generated_text",
]

#: Languages the generator writes.
LANGUAGES = ("en", "ru")

#: Characters per token of generated text against the real novels in ``data/texts``
#: (``ru_tolstoy-voyna-i-mir-vol1.txt``, ``en_stoker-dracula.txt``), measured with the
#: tokenizers of :func:`windowfit.tokenizers.load_backend`; ``seed/real`` is the script
#: rule's estimate over the o200k count. Kept here so that a change to the word lists that
#: moves these far is noticed (``tests/test_sim_texts.py`` checks them).
MEASURED: dict[str, dict[str, float]] = {
    "ru": {"o200k": 3.36, "cl100k": 2.0, "real_o200k": 3.28, "real_cl100k": 2.07},
    "en": {"o200k": 4.58, "cl100k": 4.5, "real_o200k": 4.24, "real_cl100k": 4.22},
}


class TextSource(Protocol):
    """Where the files' texts come from: a text of about ``chars`` characters for a key."""

    name: str

    def text(self, language: str, key: str, chars: int) -> str: ...


# --------------------------------------------------------------------------------------
# Word lists


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_RU_FUNCTION = _words(
    """
    и и и и в в в не не не на на что что с с он она как но по к у из за от о же бы уже
    ещё так только когда где вот да нет это всё все тот то эта этот его её их ему ей им
    ним ней них себя себе своей свою своего который которая которое которые которых тоже
    даже теперь тогда потом там тут здесь чтобы если или ни ли было был была были будет
    очень совсем почти опять снова вдруг наконец сейчас всегда никогда может быть надо
    нельзя хотя потому ведь разве неужели именно еще при про без для до через после перед
    между под над около мимо вместо
    """
)
_RU_PRONOUNS = _words("он она они я мы вы ты оно кто никто каждый всякий")
_RU_NAMES = _words(
    """
    Иван Ивана Ивану Иваном Анна Анны Анне Анну Михаил Михаила Михаилу Елена Елены Елене
    Дмитрий Дмитрия Ольга Ольги Ольгу Сергей Сергея Сергею Татьяна Татьяны Павел Павла
    Катерина Катерины Алексей Алексея Вера Веры Вере Николай Николая Николаю Марья Марьи
    Степан Степана Аграфена Аграфены Пётр Петра Петру Наталья Натальи Василий Василия
    """
)
_RU_TITLES = _words(
    """
    князь княжна граф графиня генерал полковник доктор капитан барыня старик старушка
    Петрович Сергеевна Николаевич Андреевна Ильич Павловна Михайлович Степановна
    """
)
_RU_NOUN_M = _words(
    """
    стол дом город народ полк солдат офицер генерал сын враг лес сад разговор вечер голос
    взгляд вопрос ответ приказ штаб мост берег двор кабинет портрет рассказ император
    адъютант министр экипаж обед бал зал театр полковник мундир звук шаг свет след смех
    страх поход овраг холм выстрел барабан батальон эскадрон отряд мальчик купец ужин
    завтрак сундук диван коридор
    """
)
_RU_NOUN_F = _words(
    """
    комнат дорог книг голов рук ног сторон минут войн жен сестр девушк женщин княжн
    графин улыбк записк карет работ душ вод зим весн погод свеч шляп бумаг дам старушк
    тётк столиц границ страниц картин лестниц музык усадьб мельниц избушк тропинк
    """
)
_RU_NOUN_N = _words(
    """
    окн лиц дел слов письм мест утр войск зеркал кресл блюд колес озер сукн ружь полотн
    """
)
_RU_ADJ = _words(
    """
    стар молод красив тёмн светл тих весёл грустн военн русск французск длинн коротк нов
    добр умн странн тяжёл лёгк прекрасн важн бедн богат бледн быстр медленн холодн знаком
    бел чёрн красн зелён сер слаб сильн горд широк высок глубок строг спокойн серьёзн
    счастлив несчастн ласков нежн мрачн любезн учтив нервн полн пуст маленьк
    """
)
_RU_VERB_PAST = _words(
    """
    сказа говори смотре посмотре дума подума чувствова понима поня спрашива спроси отвеча
    ответи вспомина вспомни поднима подня слуша услыша виде увиде ходи стоя сиде лежа писа
    написа чита прочита жда получи зна хоте ста начина нача продолжа остави замети держа
    взя броси повтори прибави крича закрича шепта прошепта еха приеха уеха вздохну
    покрасне побледне молча замолча реши узна приказа позва пода отвори закры
    """
)
_RU_VERB_REFL = _words(
    """
    улыбну засмея оберну останови подня опусти вороти верну испуга удиви обрадова
    задума прости поклони отверну
    """
)
_RU_VERB_PRESENT = _words(
    """
    говорит смотрит думает знает хочет может идёт стоит сидит лежит понимает чувствует
    слышит видит ждёт пишет читает говорят смотрят думают знают хотят могут идут стоят
    сидят понимаем знаем хочу могу думаю знаю понимаю прошу скажу говорю
    """
)
_RU_ADV = _words(
    """
    медленно тихо быстро странно громко весело грустно спокойно холодно ласково строго
    нежно серьёзно небрежно робко поспешно задумчиво рассеянно прямо долго давно скоро
    рано поздно вместе отдельно нарочно невольно решительно
    """
)
_RU_PREP = _words("в на с к у из за от о по под над перед через после до около без при для")
_RU_CONJ = (", и", ", но", ", а", ", что", ", когда", ", потому что", ", хотя", ", чтобы", " и")
_RU_SAID = _words("сказал сказала отвечал отвечала проговорил проговорила спросил спросила")


def _ru_fix(word: str) -> str:
    """The spelling rule after г, к, х, ж, ш, ч, щ (ы -> и; я -> а is not needed)."""
    return re.sub(r"(?<=[гкхжшчщ])ы", "и", word)


_RU_M_END = ("", "а", "у", "ом", "е", "ы", "ов", "ам", "ами", "ах")
_RU_F_END = ("а", "ы", "е", "у", "ой", "ам", "ами", "ах")
_RU_N_END = ("о", "а", "у", "ом", "е", "ам", "ами", "ах")
_RU_ADJ_END = ("ый", "ая", "ое", "ые", "ого", "ой", "ому", "ую", "ым", "ыми", "ых")
_RU_PAST_END = ("л", "л", "ла", "ла", "ли", "ло")
_RU_REFL_END = ("лся", "лась", "лись")


def _ru_noun(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return _ru_fix(rng.choice(_RU_NOUN_M) + rng.choice(_RU_M_END))
    if kind < 0.85:
        return _ru_fix(rng.choice(_RU_NOUN_F) + rng.choice(_RU_F_END))
    return _ru_fix(rng.choice(_RU_NOUN_N) + rng.choice(_RU_N_END))


def _ru_adj(rng: random.Random) -> str:
    return _ru_fix(rng.choice(_RU_ADJ) + rng.choice(_RU_ADJ_END))


def _ru_verb(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.6:
        return rng.choice(_RU_VERB_PAST) + rng.choice(_RU_PAST_END)
    if kind < 0.75:
        return rng.choice(_RU_VERB_REFL) + rng.choice(_RU_REFL_END)
    return rng.choice(_RU_VERB_PRESENT)


def _ru_subject(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(_RU_PRONOUNS)
    if kind < 0.65:
        name = rng.choice(_RU_NAMES[::2])
        return f"{rng.choice(_RU_TITLES)} {name}" if rng.random() < 0.2 else name
    return f"{_ru_adj(rng)} {_ru_noun(rng)}"


def _ru_clause(rng: random.Random) -> str:
    parts = [_ru_subject(rng)]
    if rng.random() < 0.35:
        parts.append(rng.choice(_RU_ADV))
    if rng.random() < 0.25:
        parts.append(rng.choice(_RU_FUNCTION))
    parts.append(_ru_verb(rng))
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
        kind = rng.random()
        if kind < 0.4:
            phrase = [rng.choice(_RU_PREP)]
            if rng.random() < 0.5:
                phrase.append(_ru_adj(rng))
            phrase.append(_ru_noun(rng))
            parts.append(" ".join(phrase))
        elif kind < 0.7:
            parts.append(_ru_noun(rng) if rng.random() < 0.6 else rng.choice(_RU_NAMES))
        elif kind < 0.85:
            parts.append(rng.choice(_RU_FUNCTION))
        else:
            parts.append(rng.choice(_RU_ADV))
    return " ".join(parts)


def _ru_sentence(rng: random.Random) -> str:
    text = _ru_clause(rng)
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        text += f"{rng.choice(_RU_CONJ)} {_ru_clause(rng)}"
    end = rng.choice(".........!?…")
    if rng.random() < 0.18:  # dialogue: — Реплика, — сказал он.
        said = f"{rng.choice(_RU_SAID)} {_ru_subject(rng)}"
        return f"— {text[0].upper()}{text[1:]}{end if end != '.' else ','} — {said}."
    return f"{text[0].upper()}{text[1:]}{end}"


_EN_FUNCTION = _words(
    """
    the the the the of of of and and and to to a a in in that it was was he she his her
    with as had for not at but be on you him all by which they so my have from this were
    me one there would an what when no their who if could been we them or more upon into
    out some then only little now very over before must than such our your may well again
    down still even never always perhaps just quite indeed almost already once yet
    """
)
_EN_PRONOUNS = _words("he she they I we you it someone nobody everyone")
_EN_NAMES = _words(
    """
    Harriet Thomas Margaret Edward Lucy Arthur Eleanor Henry Clara William Agnes Robert
    Mrs.Ashby Mr.Holloway Dr.Pryce Captain Miss
    """
)
_EN_NOUNS = _words(
    """
    house room door window road letter book hand face voice eye eyes head heart night day
    morning evening garden river bridge carriage horse station train journey country town
    village church street castle stair staircase candle lamp table chair fire hearth wall
    silence shadow light moment hour week year friend brother sister mother father doctor
    servant master stranger question answer promise secret story paper pen map picture
    storm wind rain snow forest hill valley field path gate corridor library kitchen
    cellar chapel harbour ship sea coast letter telegram diary notebook manner purpose
    fear hope doubt courage anger pity sorrow laughter whisper memory dream habit
    """
)
_EN_ADJ = _words(
    """
    old young dark pale quiet strange long short heavy light cold warm grey white black
    narrow wide deep silent bright dim tired anxious eager gentle grave kind stern curious
    sudden distant familiar empty crowded ancient modern little great sombre weary solemn
    cheerful faint broken careful careless splendid wretched peculiar
    """
)
_EN_VERBS = _words(
    """
    said looked thought felt knew saw heard took came went turned stood sat walked ran
    opened closed asked answered smiled laughed whispered wrote read waited watched found
    left kept held brought carried followed noticed remembered forgot wondered seemed
    began tried called reached passed crossed climbed stopped listened hesitated returned
    explained promised insisted replied muttered glanced shivered trembled hurried
    """
)
_EN_ADV = _words(
    """
    slowly quietly quickly strangely loudly gravely gently suddenly silently carefully
    certainly hardly nearly presently afterwards together alone abroad softly sharply
    """
)
#: Less common words: real prose has many, and a tokenizer splits them into pieces.
_EN_RARE = _words(
    """
    Transylvanian Carpathians diligence sarcophagus phonograph chloroform melancholy
    inexplicable superstition hospitality peasantry crucifix somnambulism apprehension
    bewilderment incredulity indescribable scrutinise recollection phosphorescent
    embrasure parapet wolfish unutterable precipice ravine foreboding sepulchre Whitby
    Hampstead Purfleet Piccadilly Exeter Bistritz Klausenburgh Budapest Danube Varna
    chapel-yard churchyard moonlight nightfall overcoat shorthand portmanteau landlady
    paprika mamaliga impletata gesticulated reassuringly unaccountably imperceptibly
    counterfeit bequeathed solicitor estate conveyance Lloyd's telegraphed dispatched
    vampiric undead boyar voivode Szekely Slovaks Magyars Huns Wallachia Moldavia Golden
    """
)
_EN_CONTRACTIONS = _words("don't can't won't I'm it's didn't couldn't wouldn't I've we'll")
_EN_PREP = _words("in on at from with without into across through under over behind beside")
_EN_CONJ = (", and", ", but", ", for", "; and", ", while", ", though", " and", ", so that", " —")
_EN_SAID = _words("said asked answered replied whispered cried")
_EN_MONTHS = _words("January February March April May June July August September October")


_EN_RARE_NOUNS = _words(
    """
    diligence sarcophagus phonograph chloroform superstition hospitality peasantry crucifix
    somnambulism apprehension bewilderment incredulity recollection embrasure parapet
    precipice ravine foreboding sepulchre churchyard moonlight nightfall overcoat shorthand
    portmanteau landlady conveyance solicitor estate boyar voivode escritoire counterpane
    wainscot balustrade casement lodgings coachman innkeeper physician asylum laboratory
    """
)
_EN_RARE_ADJ = _words(
    """
    melancholy inexplicable indescribable phosphorescent wolfish unutterable vampiric
    undead ghastly spectral crumbling cavernous mouldering lurid sinister tremulous
    hospitable garrulous querulous immeasurable interminable incoherent feverish
    """
)


#: Short phrases that make up much of real English prose.
_EN_FILLERS = (
    "it was",
    "there was",
    "he had",
    "as if",
    "at last",
    "of the",
    "in the",
    "to be",
    "I could not",
    "that I",
    "for a moment",
    "and then",
    "so that I",
    "as I did",
    "we had to",
    "if it is",
    "but he",
    "all of us",
    "I do not know",
    "it is so",
    "and I saw",
    "by the way",
    "out of it",
    "I am sure",
    "as he did so",
)


def _en_noun(rng: random.Random) -> str:
    return rng.choice(_EN_RARE_NOUNS if rng.random() < 0.22 else _EN_NOUNS)


def _en_adj(rng: random.Random) -> str:
    return rng.choice(_EN_RARE_ADJ if rng.random() < 0.22 else _EN_ADJ)


def _en_subject(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(_EN_PRONOUNS)
    if kind < 0.6:
        return rng.choice(_EN_NAMES).replace(".", ". ")
    return f"the {_en_adj(rng)} {_en_noun(rng)}"


def _en_clause(rng: random.Random) -> str:
    parts = [_en_subject(rng)]
    if rng.random() < 0.3:
        parts.insert(0, rng.choice(_EN_FILLERS) + ",")
    if rng.random() < 0.25:
        parts.append(rng.choice(_EN_ADV))
    parts.append(rng.choice(_EN_VERBS))
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
        kind = rng.random()
        if kind < 0.45:
            article = rng.choice(("the", "the", "a", "his", "her", "their", "that"))
            adj = f"{_en_adj(rng)}, " if rng.random() < 0.15 else ""
            adj += f"{_en_adj(rng)} " if rng.random() < 0.5 else ""
            parts.append(f"{rng.choice(_EN_PREP)} {article} {adj}{_en_noun(rng)}")
        elif kind < 0.7:
            parts.append(f"{rng.choice(('the', 'a', 'his', 'her'))} {_en_noun(rng)}")
        elif kind < 0.8:
            parts.append(rng.choice(_EN_FUNCTION))
            parts.append(rng.choice(_EN_FILLERS))
        elif kind < 0.9:
            parts.append(rng.choice(_EN_RARE))
        elif kind < 0.95:
            parts.append(rng.choice(_EN_CONTRACTIONS))
        else:
            parts.append(rng.choice(_EN_ADV))
    return " ".join(parts)


def _en_sentence(rng: random.Random) -> str:
    text = _en_clause(rng)
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        text += f"{rng.choice(_EN_CONJ)} {_en_clause(rng)}"
    end = rng.choice("........!?")
    if rng.random() < 0.15:
        said = f"{rng.choice(_EN_SAID)} {_en_subject(rng)}"
        return f"“{text[0].upper()}{text[1:]}{end if end != '.' else ','}” {said}."
    text = f"{text[0].upper()}{text[1:]}{end}"
    if rng.random() < 0.06:  # a diary date, as in an epistolary novel
        day, hour = rng.randint(1, 28), f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}"
        return f"{day} {rng.choice(_EN_MONTHS)}, {hour} P. M. ({rng.choice(_EN_RARE)}.) {text}"
    return text


_SENTENCES: dict[str, Callable[[random.Random], str]] = {"ru": _ru_sentence, "en": _en_sentence}
_HEADINGS = {"ru": "Глава", "en": "Chapter"}
_POOL_SIZE = 6000
_DIALOGUE = ("—", "“")


@cache
def _pool(language: str) -> tuple[str, ...]:
    make = _SENTENCES[language]
    rng = random.Random(f"windowfit-sim-texts:{language}")
    return tuple(make(rng) for _ in range(_POOL_SIZE))


def _roman(number: int) -> str:
    out = []
    for value, letters in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while number >= value:
            out.append(letters)
            number -= value
    return "".join(out)


def generated_text(language: str, key: str, chars: int) -> str:
    """About ``chars`` characters of prose in ``language`` (``"ru"`` or ``"en"``).

    The same ``(language, key, chars)`` always gives the same text; different keys give
    different texts. The text opens with a heading (numbered when ``key`` ends in a number)
    and is cut at a sentence end, so it is at most a sentence longer than ``chars``.
    """
    if language not in _SENTENCES:
        raise ValueError(f"no generator for language {language!r}; known: {', '.join(LANGUAGES)}")
    pool = _pool(language)
    rng = random.Random(f"{language}:{key}")
    number = re.search(r"(\d+)\D*$", key)
    heading = f"{_HEADINGS[language]} {_roman(int(number.group(1))) if number else key}"
    paragraphs = [heading]
    size = len(heading)
    while size < chars:
        first = rng.choice(pool)
        paragraph = [first]
        size += len(first) + 2
        if not first.startswith(_DIALOGUE):  # a line of dialogue stands alone
            for sentence in rng.choices(pool, k=rng.randint(1, 8)):
                if size >= chars:
                    break
                if not sentence.startswith(_DIALOGUE):
                    paragraph.append(sentence)
                    size += len(sentence) + 1
        paragraphs.append(" ".join(paragraph))
    return "\n\n".join(paragraphs)


class GeneratedTexts:
    """Generated prose (the default): see :func:`generated_text`."""

    name = "generated prose (English and Russian), deterministic"

    def text(self, language: str, key: str, chars: int) -> str:
        return generated_text(language, key, chars)


class DirectoryTexts:
    """Real texts from a directory of ``<language>_*.txt`` files (``data/texts`` naming).

    The files of a language are joined in name order and cut into consecutive pieces of
    about ``chars`` characters, ending at paragraph breaks; each new key takes the next
    piece, going round to the start when the texts run out (so a run that asks for more
    text than there is repeats some of it: ``wrapped`` names the languages that did).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"{self.directory}: not a directory")
        self.name = f"texts from {self.directory}"
        self._texts: dict[str, str] = {}
        self._given: dict[tuple[str, str, int], str] = {}
        self._offsets: dict[str, int] = {}
        self.wrapped: set[str] = set()

    def files(self, language: str) -> Sequence[Path]:
        return sorted(self.directory.glob(f"{language}_*.txt"))

    def _all(self, language: str) -> str:
        text = self._texts.get(language)
        if text is None:
            files = self.files(language)
            if not files:
                raise FileNotFoundError(
                    f"{self.directory}: no {language}_*.txt file for language {language!r}"
                )
            text = "\n\n".join(f.read_text(encoding="utf-8") for f in files)
            if not text.strip():
                raise FileNotFoundError(f"{self.directory}: the {language}_*.txt files are empty")
            self._texts[language] = text
        return text

    def text(self, language: str, key: str, chars: int) -> str:
        given = self._given.get((language, key, chars))
        if given is not None:
            return given
        whole = self._all(language)
        start = self._offsets.get(language, 0)
        pieces: list[str] = []
        need = chars
        while need > 0:
            if start >= len(whole):
                start = 0
                self.wrapped.add(language)
            end = start + need
            if end < len(whole):
                cut = whole.rfind("\n\n", start + need // 2, end)  # end at a paragraph break
                pieces.append(whole[start : cut if cut > start else end])
                start = cut if cut > start else end
                break
            pieces.append(whole[start:])  # the texts run out: go on from their start
            need -= len(whole) - start
            start = len(whole)
        self._offsets[language] = start
        text = "\n\n".join(p.strip() for p in pieces if p.strip())
        self._given[(language, key, chars)] = text
        return text
