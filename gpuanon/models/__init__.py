"""The learning models shared by the evaluation and federated learning.

:mod:`.nn` one PyTorch multi-layer perceptron for every backend.
"""
