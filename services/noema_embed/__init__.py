"""The embed worker: gives every new memory a vector under the current model."""
