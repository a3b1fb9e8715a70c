"""A partly wrong submission: add is right, is_prime never returns for n < 2 (the
sandbox's CPU limit ends it), and reverse_words reverses the letters too."""


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a + b


def is_prime(n: int) -> bool:
    """Whether n is a prime number."""
    divisor = 2
    while divisor != n:
        if n % divisor == 0:
            return False
        divisor += 1
    return True


def reverse_words(text: str) -> str:
    """The words of text in reverse order, separated by single spaces."""
    return text[::-1]
