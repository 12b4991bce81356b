package postgres

import "time"

// ForgetWordCounts makes s start searches by words knowing no word's
// count, as a store does before PostgreSQL has analysed key_words.
func ForgetWordCounts(s *Store) {
	s.words.set(map[string]float64{}, time.Now())
}

// ReadWordCounts makes s read its word counts anew at its next search by
// words, and forget the words it learned.
func ReadWordCounts(s *Store) {
	s.words.mu.Lock()
	defer s.words.mu.Unlock()
	s.words.read, s.words.learned = time.Time{}, nil
}

// WordSearchStarts reports how s's searches by words started: from the
// word guessed rarest, from a guess that was not rare, counted.
func WordSearchStarts(s *Store) (guess, missed, counted int64) {
	return s.words.fromGuess.Load(), s.words.missed.Load(), s.words.counted.Load()
}
