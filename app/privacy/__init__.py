"""What a survey's privacy settings and a respondent's stored answers guarantee:
the privacy summary and the privacy receipt."""
