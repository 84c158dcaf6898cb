"""What a point asks the engine: random token ids, or a prompt file through a template; registry.py names them."""
