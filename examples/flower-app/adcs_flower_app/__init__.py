"""ADCS on the paper's Fashion-MNIST workload as a Flower app (ServerApp + ClientApp)."""
