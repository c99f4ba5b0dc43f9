"""Flower's PyTorch quickstart shape on Fashion-MNIST, scheduled by adcs's ScheduledFedAvg."""
