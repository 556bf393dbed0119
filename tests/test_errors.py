"""Every error the front ends print is one line, made so by the error type itself."""

import pytest

from embedbench.errors import ConfigError, ContentionError, EmbedbenchError, StaleCodeError


@pytest.mark.parametrize("kind", [EmbedbenchError, ConfigError, StaleCodeError])
def test_the_error_type_collapses_its_message_to_one_line(kind):
    error = kind("first line\n   second\tline ")
    assert str(error) == "first line second line"


def test_an_error_with_a_reading_is_one_line_too():
    error = ContentionError("core 0 is\n busy", reading={"core": 0})
    assert str(error) == "core 0 is busy" and error.reading == {"core": 0}
