-- key_words: the words of each key's user IDs, one row per word and key,
-- so that a search by words starts from its rarest word (byWords,
-- keyreads.go) instead of intersecting the GIN index's posting lists of
-- every word, which costs as much as the commonest word is common. A
-- word is a lexeme of user_ids.words, the tsvector the search checks
-- every candidate against, so each key a search matches has a row for
-- each of the search's words. Every writer of user_ids writes these rows
-- in the same transaction, from the user_ids rows (insertKeyWords,
-- deleteKeyWords, keywrites.go). No counter row: how common a word is,
-- is read from this index, up to a cap, when a search runs.
--
-- The table is rebuilt from user_ids whenever this runs: filled first and
-- indexed after, which sorts once instead of inserting into the index
-- row by row.
DROP TABLE IF EXISTS key_words;
CREATE TABLE key_words (
    word    text   COLLATE "C" NOT NULL,
    key_ref bigint NOT NULL
);
INSERT INTO key_words (word, key_ref)
    SELECT DISTINCT w.word, u.key_ref FROM user_ids u, unnest(tsvector_to_array(u.words)) AS w(word);
ALTER TABLE key_words ADD PRIMARY KEY (word, key_ref);
