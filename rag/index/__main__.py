from rag.index.main import main

if __name__ == "__main__":
    main()
