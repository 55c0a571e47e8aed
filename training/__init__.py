"""Training: WordPiece tokenizers and masked-LM pretraining of BERT encoders."""
