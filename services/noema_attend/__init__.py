"""The attend worker: decides which observations deserve attention and become memory."""
