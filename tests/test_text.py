from memfs.index.text.keywords import fts_query, query_terms, segment_cjk


def test_fts_syntax_is_neutralised() -> None:
    for query in ['"unbalanced', "a AND OR NOT", "col:value", "NEAR(a b)", "*", "^start", "(((", "-x +y"]:
        match = fts_query(query)
        assert match is None or all(part.startswith('"') and part.endswith('"') for part in match.split(" OR "))


def test_only_punctuation_gives_nothing() -> None:
    assert fts_query("?!... ** \"\" ()") is None


def test_stopwords_are_no_keywords() -> None:
    assert fts_query("what did we decide about the API") == '"decide" OR "about" OR "api"'
    assert fts_query("the who") is None  # a match on stopwords alone says nothing


def test_cjk_is_segmented_in_text_and_query() -> None:
    assert segment_cjk("我们决定") == " 我 们 决 定 "
    assert fts_query("决定数据库") == '"决 定 数 据 库"'
    assert query_terms("PostgreSQL数据库") == ["postgresql", "数据库"]
