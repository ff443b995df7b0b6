"""Hugging Face interchange: start a job from published GPT-2/Llama weights (`--init-from`) and give back
weights transformers loads (`verity job download --format hf`). configs.py maps config.json, weights.py the tensor
names and layouts, files.py reads and writes the files."""
