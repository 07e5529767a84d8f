"""PolyBench floyd-warshall: all-pairs shortest paths, path[i, j] = min(path[i, j], path[i, k] + path[k, j])."""


def floyd_warshall(N):
    for k in range(N):
        for i in range(N):
            for j in range(N):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])
